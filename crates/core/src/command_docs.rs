//! The command reference COMMAND DOCS gives beside a command's summary:
//! complexity, history, deprecation and the arguments (redis-cli builds
//! its hints and HELP syntax from them), and the key specs COMMAND INFO
//! gives. Generated from Redis 7.0's command table by
//! scripts/gen-command-docs.py (`data.rs`).

use kvasir_resp::Reply;

mod data;

/// An argument may be left out.
pub const OPTIONAL: u8 = 1;
/// An argument may repeat.
pub const MULTIPLE: u8 = 2;
/// A repeated argument repeats its token too.
pub const MULTIPLE_TOKEN: u8 = 4;

/// One argument of a command's syntax.
pub struct Arg {
    pub name: &'static str,
    /// string, integer, double, key, pattern, unix-time, pure-token,
    /// oneof or block.
    pub kind: &'static str,
    /// The key spec a key argument belongs to, -1 for none.
    pub key_spec_index: i32,
    pub token: Option<&'static str>,
    pub since: Option<&'static str>,
    pub deprecated_since: Option<&'static str>,
    pub flags: u8,
    /// The alternatives of a oneof, the parts of a block.
    pub args: &'static [Arg],
}

/// Where a key spec's search for keys starts.
pub enum Begin {
    /// At this argument.
    Index(i64),
    /// After this keyword, searched from this argument (negative: from the
    /// end, backwards).
    Keyword(&'static str, i64),
    Unknown,
}

/// How a key spec's keys follow from where the search began.
pub enum Find {
    /// (last key relative to the first, or negative from the end; step;
    /// limit).
    Range(i64, i64, i64),
    /// (the argument with the key count, relative; the first key relative
    /// to it; step).
    Keynum(i64, i64, i64),
    Unknown,
}

/// One of a command's Redis 7 key specs.
pub struct KeySpec {
    pub notes: Option<&'static str>,
    /// Flag names in Redis's order (RO, RW, OW, RM, access, update...).
    pub flags: &'static [&'static str],
    pub begin: Begin,
    pub find: Find,
}

/// The reference of one command or subcommand (`container|name`).
pub struct Doc {
    pub name: &'static str,
    /// The Redis version that added it.
    pub since: &'static str,
    /// Its group (string, list, server...).
    pub group: &'static str,
    pub complexity: Option<&'static str>,
    pub doc_flags: &'static [&'static str],
    pub deprecated_since: Option<&'static str>,
    pub replaced_by: Option<&'static str>,
    /// (version, change) pairs.
    pub history: &'static [(&'static str, &'static str)],
    pub key_specs: &'static [KeySpec],
    pub args: &'static [Arg],
}

/// The reference of `full_name` (lowercase, `container|name` for a
/// subcommand), if Redis 7.0 has the command.
pub fn lookup(full_name: &str) -> Option<&'static Doc> {
    data::DOCS
        .binary_search_by(|d| d.name.cmp(full_name))
        .ok()
        .map(|i| &data::DOCS[i])
}

/// A reply map from named fields, as Redis writes its maps.
fn map(fields: Vec<(&str, Reply)>) -> Reply {
    Reply::Map(named(fields))
}

fn named(fields: Vec<(&str, Reply)>) -> Vec<(Reply, Reply)> {
    fields
        .into_iter()
        .map(|(k, v)| (Reply::bulk_str(k), v))
        .collect()
}

/// A set of flag names (status replies).
fn flag_set(names: &[&'static str]) -> Reply {
    Reply::Set(names.iter().map(|n| Reply::simple(n)).collect())
}

impl Doc {
    /// COMMAND DOCS's fields after summary, since and group, in Redis's
    /// order; the fields a command has not got are left out, as Redis
    /// does.
    pub fn fields(&self) -> Vec<(Reply, Reply)> {
        let mut out = Vec::new();
        if let Some(c) = self.complexity {
            out.push(("complexity", Reply::bulk_str(c)));
        }
        if !self.doc_flags.is_empty() {
            out.push(("doc_flags", flag_set(self.doc_flags)));
        }
        if let Some(v) = self.deprecated_since {
            out.push(("deprecated_since", Reply::bulk_str(v)));
        }
        if let Some(r) = self.replaced_by {
            out.push(("replaced_by", Reply::bulk_str(r)));
        }
        if !self.history.is_empty() {
            let history = self
                .history
                .iter()
                .map(|(v, change)| Reply::Array(vec![Reply::bulk_str(v), Reply::bulk_str(change)]))
                .collect();
            out.push(("history", Reply::Set(history)));
        }
        if !self.args.is_empty() {
            out.push(("arguments", args_reply(self.args)));
        }
        named(out)
    }
}

impl KeySpec {
    /// The entry of COMMAND INFO's key specs, as Redis writes it.
    pub fn reply(&self) -> Reply {
        let mut fields = Vec::new();
        if let Some(notes) = self.notes {
            fields.push(("notes", Reply::bulk_str(notes)));
        }
        fields.push(("flags", flag_set(self.flags)));
        let (begin, spec) = match self.begin {
            Begin::Index(i) => ("index", vec![("index", Reply::Int(i))]),
            Begin::Keyword(k, from) => (
                "keyword",
                vec![
                    ("keyword", Reply::bulk_str(k)),
                    ("startfrom", Reply::Int(from)),
                ],
            ),
            Begin::Unknown => ("unknown", Vec::new()),
        };
        fields.push((
            "begin_search",
            map(vec![("type", Reply::bulk_str(begin)), ("spec", map(spec))]),
        ));
        let (find, spec) = match self.find {
            Find::Range(last, step, limit) => (
                "range",
                vec![
                    ("lastkey", Reply::Int(last)),
                    ("keystep", Reply::Int(step)),
                    ("limit", Reply::Int(limit)),
                ],
            ),
            Find::Keynum(idx, first, step) => (
                "keynum",
                vec![
                    ("keynumidx", Reply::Int(idx)),
                    ("firstkey", Reply::Int(first)),
                    ("keystep", Reply::Int(step)),
                ],
            ),
            Find::Unknown => ("unknown", Vec::new()),
        };
        fields.push((
            "find_keys",
            map(vec![("type", Reply::bulk_str(find)), ("spec", map(spec))]),
        ));
        map(fields)
    }
}

fn args_reply(args: &[Arg]) -> Reply {
    Reply::Array(
        args.iter()
            .map(|a| {
                let mut m = vec![
                    ("name", Reply::bulk_str(a.name)),
                    ("type", Reply::bulk_str(a.kind)),
                ];
                if a.key_spec_index >= 0 {
                    m.push(("key_spec_index", Reply::Int(a.key_spec_index as i64)));
                }
                if let Some(t) = a.token {
                    m.push(("token", Reply::bulk_str(t)));
                }
                if let Some(v) = a.since {
                    m.push(("since", Reply::bulk_str(v)));
                }
                if let Some(v) = a.deprecated_since {
                    m.push(("deprecated_since", Reply::bulk_str(v)));
                }
                if a.flags != 0 {
                    let names: Vec<&'static str> = [
                        (OPTIONAL, "optional"),
                        (MULTIPLE, "multiple"),
                        (MULTIPLE_TOKEN, "multiple_token"),
                    ]
                    .iter()
                    .filter(|(f, _)| a.flags & f != 0)
                    .map(|(_, n)| *n)
                    .collect();
                    m.push(("flags", flag_set(&names)));
                }
                if matches!(a.kind, "oneof" | "block") {
                    m.push(("arguments", args_reply(a.args)));
                }
                map(m)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_is_sorted_and_holds_commands_and_subcommands() {
        assert!(data::DOCS.windows(2).all(|w| w[0].name < w[1].name));
        let set = lookup("set").expect("SET");
        assert_eq!(set.complexity, Some("O(1)"));
        assert_eq!(set.args[0].name, "key");
        assert_eq!(set.args[0].key_spec_index, 0);
        assert_eq!(set.args[2].kind, "oneof");
        assert_eq!(set.args[2].flags, OPTIONAL);
        assert!(lookup("client|kill").is_some());
        assert!(lookup("georadius").is_some_and(|d| d.doc_flags == ["deprecated"]));
        assert!(lookup("nosuch").is_none());
    }
}
