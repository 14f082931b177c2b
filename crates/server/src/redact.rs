//! Arguments that carry secrets (passwords, ACL rules), which SLOWLOG and
//! MONITOR show as `(redacted)`, as Redis 7 redacts them: every argument
//! of AUTH and of ACL SETUSER after the subcommand, HELLO's AUTH username
//! and password, MIGRATE's AUTH / AUTH2 credentials, and the values of
//! CONFIG SET for `requirepass`, `masterauth` and `masteruser`.

use bytes::Bytes;

/// The text shown instead of a secret argument.
pub const REDACTED: &str = "(redacted)";

/// Configuration parameters whose values are secrets (Redis's
/// SENSITIVE_CONFIG).
const SECRET_PARAMS: [&str; 3] = ["requirepass", "masterauth", "masteruser"];

/// Which arguments of `args` (a call of the command named `command`, the
/// container's name for a subcommand) are secrets: `None` when none is,
/// the common case, so callers pay nothing for ordinary commands.
pub fn secret_positions(command: &str, args: &[Bytes]) -> Option<Vec<bool>> {
    let mut secret = vec![false; args.len()];
    let mut mark = |i: usize| {
        if let Some(s) = secret.get_mut(i) {
            *s = true;
        }
    };
    match command {
        "auth" => (1..args.len()).for_each(&mut mark),
        "hello" => {
            let at = args
                .iter()
                .skip(2)
                .position(|a| a.eq_ignore_ascii_case(b"auth"))?
                + 2;
            mark(at + 1);
            mark(at + 2);
        }
        "acl" if args.len() >= 3 && args[1].eq_ignore_ascii_case(b"setuser") => {
            (2..args.len()).for_each(&mut mark)
        }
        "migrate" => {
            let mut j = 6;
            while j < args.len() {
                let opt = &args[j];
                if opt.eq_ignore_ascii_case(b"keys") {
                    break;
                } else if opt.eq_ignore_ascii_case(b"auth") {
                    mark(j + 1);
                    j += 1;
                } else if opt.eq_ignore_ascii_case(b"auth2") {
                    mark(j + 1);
                    mark(j + 2);
                    j += 2;
                }
                j += 1;
            }
        }
        "config" if args.len() >= 4 && args[1].eq_ignore_ascii_case(b"set") => {
            for name in (2..args.len()).step_by(2) {
                if SECRET_PARAMS
                    .iter()
                    .any(|p| args[name].eq_ignore_ascii_case(p.as_bytes()))
                {
                    mark(name + 1);
                }
            }
        }
        _ => return None,
    }
    secret.contains(&true).then_some(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(command: &str, args: &[&str]) -> Vec<String> {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::from(a.to_string())).collect();
        let secret = secret_positions(command, &args);
        args.iter()
            .enumerate()
            .map(|(i, a)| match &secret {
                Some(s) if s[i] => REDACTED.to_string(),
                _ => String::from_utf8_lossy(a).into_owned(),
            })
            .collect()
    }

    #[test]
    fn secrets_are_the_arguments_redis_redacts() {
        assert_eq!(shown("auth", &["AUTH", "pw"]), ["AUTH", REDACTED]);
        assert_eq!(
            shown("hello", &["HELLO", "3", "AUTH", "u", "p", "SETNAME", "n"]),
            ["HELLO", "3", "AUTH", REDACTED, REDACTED, "SETNAME", "n"]
        );
        assert_eq!(
            shown("acl", &["ACL", "SETUSER", "u", ">pw", "+get"]),
            ["ACL", "SETUSER", REDACTED, REDACTED, REDACTED]
        );
        assert_eq!(shown("acl", &["ACL", "WHOAMI"]), ["ACL", "WHOAMI"]);
        assert_eq!(
            shown(
                "migrate",
                &["MIGRATE", "h", "1", "", "0", "5000", "COPY", "AUTH", "pw", "KEYS", "AUTH", "k"]
            ),
            ["MIGRATE", "h", "1", "", "0", "5000", "COPY", "AUTH", REDACTED, "KEYS", "AUTH", "k"]
        );
        assert_eq!(
            shown(
                "migrate",
                &["MIGRATE", "h", "1", "k", "0", "5000", "AUTH2", "u", "p"]
            ),
            ["MIGRATE", "h", "1", "k", "0", "5000", "AUTH2", REDACTED, REDACTED]
        );
        assert_eq!(
            shown(
                "config",
                &[
                    "CONFIG",
                    "SET",
                    "maxmemory",
                    "1",
                    "REQUIREPASS",
                    "pw",
                    "masterauth",
                    "x"
                ]
            ),
            [
                "CONFIG",
                "SET",
                "maxmemory",
                "1",
                "REQUIREPASS",
                REDACTED,
                "masterauth",
                REDACTED
            ]
        );
        assert_eq!(shown("set", &["SET", "auth", "x"]), ["SET", "auth", "x"]);
        assert!(secret_positions("hello", &[Bytes::from("HELLO"), Bytes::from("3")]).is_none());
    }
}
