//! redis-server's way of configuring a server at start: a redis.conf file
//! (`name arg ...` lines, `#` comments, quoted arguments, `include`) and
//! `--name arg ...` on the command line, applied in that order. Every
//! parameter CONFIG SET knows is accepted, and also the ones only a start
//! may set (port, bind, dir, databases, daemonize...). A bad line stops the
//! start with redis-server's message.

use crate::config::{Config, SetError};

/// One directive and where it came from (for the error message).
#[derive(Debug, Clone, PartialEq)]
pub struct Directive {
    pub name: String,
    pub args: Vec<String>,
    /// `file:line` or `command line`.
    pub origin: String,
    /// The line as written.
    pub text: String,
}

/// Splits one line as Redis's `sdssplitargs`: spaces separate, "double
/// quotes" take \n \r \t \b \a \\ \" and \xHH escapes, 'single quotes' take
/// \' only. None for an unbalanced quote.
pub fn split_args(line: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else {
            return Some(out);
        };
        let mut arg = String::new();
        match first {
            '"' => {
                chars.next();
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => match chars.next()? {
                            'n' => arg.push('\n'),
                            'r' => arg.push('\r'),
                            't' => arg.push('\t'),
                            'b' => arg.push('\u{8}'),
                            'a' => arg.push('\u{7}'),
                            'x' => {
                                let hex: String = [chars.next()?, chars.next()?].iter().collect();
                                arg.push(u8::from_str_radix(&hex, 16).ok()? as char);
                            }
                            other => arg.push(other),
                        },
                        c => arg.push(c),
                    }
                }
                // A closing quote must be followed by a space or the end.
                if chars.peek().is_some_and(|c| !c.is_whitespace()) {
                    return None;
                }
            }
            '\'' => {
                chars.next();
                loop {
                    match chars.next()? {
                        '\'' => break,
                        '\\' if chars.peek() == Some(&'\'') => {
                            chars.next();
                            arg.push('\'');
                        }
                        c => arg.push(c),
                    }
                }
                if chars.peek().is_some_and(|c| !c.is_whitespace()) {
                    return None;
                }
            }
            _ => {
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() {
                        break;
                    }
                    arg.push(c);
                    chars.next();
                }
            }
        }
        out.push(arg);
    }
}

/// The directives of a redis.conf file, `include`d files expanded in place.
pub fn read_file(path: &str, depth: usize) -> Result<Vec<Directive>, String> {
    if depth > 16 {
        return Err(format!("{path}: include nested too deeply"));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("Fatal error, can't open config file '{path}': {e}"))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let origin = format!("{path}:{}", i + 1);
        let Some(mut args) = split_args(trimmed) else {
            return Err(fatal(
                &origin,
                trimmed,
                "Unbalanced quotes in configuration line",
            ));
        };
        let name = args.remove(0).to_ascii_lowercase();
        if name == "include" {
            let [file] = args.as_slice() else {
                return Err(fatal(
                    &origin,
                    trimmed,
                    "Bad directive or wrong number of arguments",
                ));
            };
            out.extend(read_file(file, depth + 1)?);
            continue;
        }
        out.push(Directive {
            name,
            args,
            origin,
            text: trimmed.to_string(),
        });
    }
    Ok(out)
}

/// `--name arg ...` from the command line, read as redis-server 7 reads it:
/// every argument up to the next `--name` belongs to the name before it;
/// a name still without a value takes the next word as its value even if
/// it starts with `--` (`--proc-title-template --my--title`); one word may
/// hold the name and its values (`"--maxmemory 700mb"`); bare words before
/// any `--name` are a parameter of their own (`loglevel verbose`); `--save`
/// with nothing after it, or before another `--name`, is `save ""`.
pub fn from_command_line(words: &[String]) -> Result<Vec<Directive>, String> {
    let mut out: Vec<Directive> = Vec::new();
    let mut words = words.iter().peekable();
    while let Some(w) = words.next() {
        let takes_name = out.last().is_none_or(|d| !d.args.is_empty());
        let text = match w.strip_prefix("--") {
            Some(text) if takes_name => text,
            None if out.is_empty() => w.as_str(),
            _ => {
                if let Some(d) = out.last_mut() {
                    d.args.push(w.clone());
                }
                continue;
            }
        };
        let mut parts = split_args(text)
            .filter(|p| !p.is_empty())
            .ok_or_else(|| format!("unexpected argument '{w}'"))?;
        let name = parts.remove(0).to_ascii_lowercase();
        let mut d = Directive {
            name,
            args: parts,
            origin: "command line".to_string(),
            text: String::new(),
        };
        if d.name == "save"
            && d.args.is_empty()
            && words.peek().is_none_or(|next| next.starts_with("--"))
        {
            d.args.push(String::new());
        }
        out.push(d);
    }
    // As redis-server shows a command-line option in its errors: the name,
    // then each value quoted (`port "6379" "6380"`).
    for d in &mut out {
        d.text = d.name.clone();
        for arg in &d.args {
            d.text.push(' ');
            crate::monitor::quote(arg.as_bytes(), &mut d.text);
        }
    }
    Ok(out)
}

/// Parameters that take several values (or none); every other known
/// parameter takes exactly one.
const MULTI_ARG: &[&str] = &[
    "save",
    "bind",
    "user",
    "client-output-buffer-limit",
    "oom-score-adj-values",
    "shutdown-on-sigint",
    "shutdown-on-sigterm",
    "replicaof",
    "slaveof",
    "rename-command",
    "loadmodule",
    "include",
];

/// Whether `name` is a parameter this server knows (a wrong number of
/// values for it is "wrong number of arguments", not a bad directive).
fn is_known(config: &Config, name: &str) -> bool {
    matches!(
        name,
        "port" | "bind" | "dir" | "databases" | "io-threads" | "user" | "save"
    ) || !matches!(config.clone().set(name, "0"), Err(SetError::Unknown))
}

fn fatal(origin: &str, text: &str, why: &str) -> String {
    format!(
        "\n*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***\nReading the configuration file, at {origin}\n>>> '{text}'\n{why}"
    )
}

/// Applies directives in order, as a start would: what CONFIG SET refuses
/// as immutable is set here.
pub fn apply(config: &mut Config, directives: &[Directive]) -> Result<(), String> {
    // Redis reads `save` lines as a list: the first replaces the defaults,
    // the next ones add their points (`save ""` empties it).
    let mut save_seen = false;
    for d in directives {
        let value = d.args.join(" ");
        let bad = |why: &str| fatal(&d.origin, &d.text, why);
        if d.args.len() != 1 && !MULTI_ARG.contains(&d.name.as_str()) && is_known(config, &d.name) {
            return Err(bad("wrong number of arguments"));
        }
        let result = match d.name.as_str() {
            "port" => match value.parse::<i64>() {
                Ok(p) => u16::try_from(p)
                    .map(|p| config.port = p)
                    .map_err(|_| bad("argument must be between 0 and 65535 inclusive")),
                Err(_) => Err(bad("argument couldn't be parsed into an integer")),
            },
            "bind" if !d.args.is_empty() => {
                config.bind = value.clone();
                Ok(())
            }
            "user" if config.acl_users.iter().any(|u| u.first() == d.args.first()) => {
                Err(bad(&format!(
                    "Error in user declaration '{}': Duplicate user found. A user can only be \
                     defined once in config files",
                    d.args[0]
                )))
            }
            "user" if !d.args.is_empty() => {
                config.acl_users.push(d.args.clone());
                // Checked now, so a bad rule stops the start with its reason.
                let all_channels = config.stored.get("acl-pubsub-default") == Some("allchannels");
                crate::acl::Acl::default()
                    .load_configured(std::slice::from_ref(&d.args), all_channels)
                    .map_err(|why| bad(&why))
            }
            "dir" if d.args.len() == 1 => {
                config.dir = value.clone();
                Ok(())
            }
            "databases" => match value.parse::<usize>() {
                Ok(n) if n >= 1 => {
                    config.databases = n;
                    Ok(())
                }
                _ => Err(bad("Invalid number of databases")),
            },
            "io-threads" => match value.parse::<usize>() {
                Ok(n) if n >= 1 => {
                    config.threads = n;
                    Ok(())
                }
                _ => Err(bad("Invalid number of io threads")),
            },
            // Host and port ("no one": none), checked as redis-server
            // checks them; Kvasir keeps the value (it has no replicas).
            // One quoted "host port" is what CONFIG REWRITE writes, and an
            // empty one what it wrote before it left the line out.
            "replicaof" | "slaveof" => match value.split_whitespace().collect::<Vec<_>>()[..] {
                [] => config
                    .set("replicaof", "")
                    .map_err(|_| bad("Invalid master port")),
                [host, port]
                    if host.eq_ignore_ascii_case("no") && port.eq_ignore_ascii_case("one") =>
                {
                    config
                        .set("replicaof", "")
                        .map_err(|_| bad("Invalid master port"))
                }
                [_, port] if port.parse::<u16>().is_err() => Err(bad("Invalid master port")),
                [_, _] => config
                    .set("replicaof", &value)
                    .map_err(|_| bad("Invalid master port")),
                _ => Err(bad("wrong number of arguments")),
            },
            "rename-command" => match d.args.as_slice() {
                [old, new] => config.renames.add(old, new).map_err(bad),
                _ => Err(bad("Bad directive or wrong number of arguments")),
            },
            // A multi-argument parameter given no value (`save ` as Redis's
            // own test harness writes it) is set empty, as `save ""`.
            "save" if d.args.is_empty() => config
                .set("save", "")
                .map_err(|_| bad("Invalid save parameters")),
            "save" if std::mem::replace(&mut save_seen, true) && !value.trim().is_empty() => {
                let points = format!("{} {value}", config.save);
                config
                    .set("save", points.trim())
                    .map_err(|_| bad("Invalid save parameters"))
            }
            // Their own check tells what an empty value lacks.
            _ if d.args.is_empty() && !d.name.starts_with("shutdown-on-sig") => {
                Err(bad("Bad directive or wrong number of arguments"))
            }
            name => match config.set(name, &value) {
                Ok(()) => Ok(()),
                Err(SetError::Immutable) => config
                    .stored
                    .set_at_start(name, &value)
                    .map_err(|why| bad(&why)),
                Err(SetError::Unknown) => Err(bad("Bad directive or wrong number of arguments")),
                Err(SetError::Invalid(why)) => Err(bad(&why)),
            },
        };
        result?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn arguments_split_as_sdssplitargs() {
        assert_eq!(
            split_args(r#"save "900 1" 'it''s' "a\tb\x41" plain"#),
            None,
            "a quote glued to the next one"
        );
        assert_eq!(
            split_args(r#"save "900 1" 'it\'s' "a\tb\x41" plain"#),
            Some(words(&["save", "900 1", "it's", "a\tbA", "plain"]))
        );
        assert_eq!(split_args(r#"requirepass "open"#), None);
        assert_eq!(split_args("  "), Some(Vec::new()));
        assert_eq!(split_args(r#"save """#), Some(words(&["save", ""])));
    }

    #[test]
    fn command_line_pairs_take_every_value_up_to_the_next_name() {
        let d = from_command_line(&words(&[
            "--save",
            "900",
            "1",
            "--appendonly",
            "no",
            "--maxmemory",
            "10mb",
        ]))
        .expect("parsed");
        let pairs: Vec<(String, Vec<String>)> = d.into_iter().map(|d| (d.name, d.args)).collect();
        assert_eq!(
            pairs,
            vec![
                ("save".into(), words(&["900", "1"])),
                ("appendonly".into(), words(&["no"])),
                ("maxmemory".into(), words(&["10mb"])),
            ]
        );
        let pairs = |w: &[&str]| -> Vec<(String, Vec<String>)> {
            from_command_line(&words(w))
                .expect("parsed")
                .into_iter()
                .map(|d| (d.name, d.args))
                .collect()
        };
        assert_eq!(
            pairs(&["--maxmemory 700mb", "--maxmemory-policy 'volatile-lru'"]),
            vec![
                ("maxmemory".into(), words(&["700mb"])),
                ("maxmemory-policy".into(), words(&["volatile-lru"])),
            ]
        );
        assert_eq!(
            pairs(&[
                "loglevel",
                "verbose",
                "--proc-title-template",
                "--my--t",
                "--save"
            ]),
            vec![
                ("loglevel".into(), words(&["verbose"])),
                ("proc-title-template".into(), words(&["--my--t"])),
                ("save".into(), words(&[""])),
            ]
        );
        assert_eq!(
            pairs(&["--save", "--loglevel", "verbose"]),
            vec![
                ("save".into(), words(&[""])),
                ("loglevel".into(), words(&["verbose"])),
            ]
        );
        assert!(from_command_line(&words(&["--"])).is_err());
    }

    /// replicaof takes a host and a port (what CONFIG REWRITE writes, one
    /// quoted "host port", too); "no one" or empty: no master.
    #[test]
    fn replicaof_takes_a_host_and_a_port() {
        let apply_words = |w: &[&str]| {
            let mut c = Config::default();
            apply(&mut c, &from_command_line(&words(w)).expect("parsed")).map(|()| c)
        };
        for ok in [
            &["--replicaof", "10.0.0.1", "6380"][..],
            &["--replicaof", "10.0.0.1 6380"],
            &["--replicaof", ""],
            &["--replicaof", "no", "one"],
        ] {
            assert!(apply_words(ok).is_ok(), "{ok:?}");
        }
        let bad = apply_words(&["--replicaof", "10.0.0.1", "x"]).expect_err("bad port");
        assert!(bad.ends_with("Invalid master port"), "{bad}");
        let one = apply_words(&["--replicaof", "10.0.0.1"]).expect_err("no port");
        assert!(one.ends_with("wrong number of arguments"), "{one}");
    }

    #[test]
    fn directives_set_runtime_and_start_only_parameters() {
        let mut c = Config::default();
        let d = from_command_line(&words(&[
            "--port",
            "7777",
            "--databases",
            "4",
            "--maxmemory",
            "1mb",
            "--save",
            "",
            "--enable-debug-command",
            "yes",
            "--hz",
            "20",
        ]))
        .expect("parsed");
        apply(&mut c, &d).expect("applied");
        assert_eq!(
            (c.port, c.databases, c.maxmemory, c.hz),
            (7777, 4, 1 << 20, 20)
        );
        assert_eq!(c.stored.get("enable-debug-command"), Some("yes"));
        let bad = from_command_line(&words(&["--no-such-thing", "1"])).expect("parsed");
        let e = apply(&mut c, &bad).expect_err("refused");
        assert!(
            e.contains("Bad directive or wrong number of arguments"),
            "{e}"
        );
        assert!(e.contains(">>> 'no-such-thing \"1\"'"), "{e}");
        let bad = from_command_line(&words(&["--maxmemory", "lots"])).expect("parsed");
        assert!(apply(&mut c, &bad).is_err());
    }

    /// The directives of `text` read as a redis.conf file (`flags` after
    /// it, as a command line), applied to a default config.
    fn applied_conf(name: &str, text: &str, flags: &[&str]) -> Config {
        let dir = std::env::temp_dir().join(format!("kvasir-conf-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("redis.conf");
        std::fs::write(&path, text).expect("write");
        let mut d = read_file(path.to_str().expect("utf-8 path"), 0).expect("read");
        d.extend(from_command_line(&words(flags)).expect("flags"));
        let mut c = Config::default();
        apply(&mut c, &d).expect("applied");
        let _ = std::fs::remove_dir_all(&dir);
        c
    }

    /// `save` with nothing after it (the line Redis's test harness writes
    /// for `save ""`) clears the save points, as Redis reads it.
    #[test]
    fn a_save_line_without_value_clears_the_save_points() {
        let c = applied_conf("save", "save 900 1\nsave \nport 7000\n", &[]);
        assert_eq!(c.save, "");
    }

    /// Several `save` lines add up, as in Redis; `save ""` empties the
    /// list and later lines add to it again; the command line goes on
    /// from the file's.
    #[test]
    fn save_lines_accumulate() {
        let c = applied_conf(
            "saves",
            "save 900 1\nsave 300 10\n",
            &["--save", "60", "10000"],
        );
        assert_eq!(c.save, "900 1 300 10 60 10000");
        let c = applied_conf("saves-reset", "save 900 1\nsave \"\"\nsave 30 5\n", &[]);
        assert_eq!(c.save, "30 5");
    }
}

/// Quotes a value for a redis.conf line when it needs it (empty, spaces,
/// quotes or control characters), as Redis's rewrite does.
fn conf_value(v: &str) -> String {
    if !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_graphic() && c != '"' && c != '\'' && c != '\\')
    {
        return v.to_string();
    }
    let mut out = String::from("\"");
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// CONFIG REWRITE: the config file's text with every parameter at its
/// current value, as Redis rewrites it: a line that sets a parameter gets
/// the current value (a repeated one is dropped), comments and other lines
/// stay, and parameters that differ from their defaults and had no line are
/// appended after `# Generated by CONFIG REWRITE` (every parameter with
/// `force_all`, DEBUG CONFIG-REWRITE-FORCE-ALL). `include`d files are not
/// rewritten.
pub fn rewrite(old: &str, config: &Config, force_all: bool) -> String {
    let current = config.entries();
    let defaults = Config::default().entries();
    let value_of = |name: &str| {
        current
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone())
    };
    let mut written: Vec<String> = Vec::new();
    let mut lines: Vec<String> = Vec::new();
    const MARKER: &str = "# Generated by CONFIG REWRITE";
    for line in old.lines() {
        let trimmed = line.trim();
        let name = split_args(trimmed)
            .and_then(|a| a.first().cloned())
            .map(|n| crate::redis_params::canonical(&n.to_ascii_lowercase()).to_string());
        match name {
            Some(name) if !trimmed.starts_with('#') && value_of(&name).is_some() => {
                if written.contains(&name) {
                    continue;
                }
                let value = value_of(&name).unwrap_or_default();
                lines.push(format!("{name} {}", conf_value(&value)));
                written.push(name);
            }
            _ => lines.push(line.to_string()),
        }
    }
    let mut appended = Vec::new();
    for (name, value) in &current {
        if written.iter().any(|w| w == name)
            || crate::redis_params::ALIASES
                .iter()
                .any(|(alias, _)| alias == name)
        {
            continue;
        }
        // No master: no line, as Redis writes it.
        if *name == "replicaof" && value.is_empty() {
            continue;
        }
        let default = defaults.iter().find(|(k, _)| k == name).map(|(_, v)| v);
        if force_all || default != Some(value) {
            appended.push(format!("{name} {}", conf_value(value)));
        }
    }
    if !appended.is_empty() {
        while lines.last().is_some_and(|l| l.trim().is_empty()) {
            lines.pop();
        }
        if !lines.iter().any(|l| l.trim() == MARKER) {
            lines.push(String::new());
            lines.push(MARKER.to_string());
        }
        lines.extend(appended);
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

#[cfg(test)]
mod rewrite_tests {
    use super::*;

    #[test]
    fn rewrite_keeps_comments_updates_lines_and_appends_changes() {
        let old = "# my server\nmaxmemory 2mb\nhz 10\nhz 11\nunknown-line stays\n";
        let mut c = Config::default();
        c.set("maxmemory", "3mb").expect("set");
        c.set("slowlog-max-len", "77").expect("set");
        c.set("save", "").expect("set");
        let text = rewrite(old, &c, false);
        assert!(
            text.starts_with("# my server\nmaxmemory 3145728\nhz 10\nunknown-line stays\n"),
            "{text}"
        );
        assert!(text.contains("\n# Generated by CONFIG REWRITE\n"), "{text}");
        assert!(text.contains("\nslowlog-max-len 77\n"), "{text}");
        assert!(!text.contains("hz 11"), "{text}");
        // A rewrite of the rewrite changes nothing.
        assert_eq!(rewrite(&text, &c, false), text);
        // And the file reads back to the same settings.
        let path = std::env::temp_dir().join(format!("kvasir-rewrite-{}.conf", std::process::id()));
        std::fs::write(&path, &text).expect("write");
        let directives = read_file(path.to_str().expect("utf8"), 0);
        let _ = std::fs::remove_file(&path);
        let directives: Vec<Directive> = directives
            .expect("read")
            .into_iter()
            .filter(|d| d.name != "unknown-line")
            .collect();
        let mut back = Config::default();
        apply(&mut back, &directives).expect("applies");
        assert_eq!(back.maxmemory, c.maxmemory);
        assert_eq!(back.slowlog_max_len, 77);
    }
}
