//! Commands as ACL rules name them: every command and subcommand of the
//! command table gets an id, once, and a selector keeps one bit per id
//! (Redis's allowed-commands bitmap), plus the first arguments allowed for
//! a command it does not allow whole (`+select|0`).

use crate::table::{all_commands, CommandSpec};
use std::collections::HashMap;
use std::sync::OnceLock;

/// A top-level command's id and whether it is a container.
#[derive(Debug, Clone, Copy)]
pub struct CommandId {
    pub id: usize,
    pub has_subcommands: bool,
    subcommands: (usize, usize),
}

impl CommandId {
    /// The ids of its subcommands.
    pub fn subcommand_ids(&self) -> std::ops::Range<usize> {
        self.subcommands.0..self.subcommands.1
    }
}

struct Index {
    commands: HashMap<&'static str, CommandId>,
    /// (parent, subcommand) -> id.
    subcommands: HashMap<(&'static str, &'static str), usize>,
    categories: HashMap<&'static str, Vec<usize>>,
    count: usize,
}

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut commands = HashMap::new();
        let mut subcommands = HashMap::new();
        let mut categories: HashMap<&'static str, Vec<usize>> = HashMap::new();
        let mut next = 0;
        let mut file = |spec: &'static CommandSpec, next: &mut usize| {
            let id = *next;
            *next += 1;
            for category in spec.acl {
                categories.entry(category).or_default().push(id);
            }
            id
        };
        for spec in all_commands() {
            let id = file(spec, &mut next);
            let first_sub = next;
            for sub in spec.subcommands {
                let sub_id = file(sub, &mut next);
                subcommands.insert((spec.name, sub.name), sub_id);
            }
            commands.insert(
                spec.name,
                CommandId {
                    id,
                    has_subcommands: !spec.subcommands.is_empty(),
                    subcommands: (first_sub, next),
                },
            );
        }
        for category in super::CATEGORIES {
            categories.entry(category).or_default();
        }
        Index {
            commands,
            subcommands,
            categories,
            count: next,
        }
    })
}

/// A top-level command by its lower-case name.
pub fn command(name: &str) -> Option<CommandId> {
    index().commands.get(name).copied()
}

/// A subcommand's id by lower-case names.
pub fn subcommand(parent: &str, name: &str) -> Option<usize> {
    index().subcommands.get(&(parent, name)).copied()
}

/// The ids of a category's commands and subcommands (`None`: no such
/// category).
pub fn in_category(category: &str) -> Option<&'static [usize]> {
    index().categories.get(category).map(|v| &v[..])
}

/// The id of a resolved command (the subcommand's when it has a parent).
pub fn id_of(spec: &CommandSpec, parent: Option<&CommandSpec>) -> Option<usize> {
    match parent {
        Some(p) => subcommand(p.name, spec.name),
        None => command(spec.name).map(|c| c.id),
    }
}

/// One bit per command id, and first arguments allowed per command.
#[derive(Debug, Clone)]
pub struct CommandBits {
    bits: Vec<u64>,
    first_args: Vec<(usize, Vec<Vec<u8>>)>,
}

impl CommandBits {
    pub fn none() -> CommandBits {
        CommandBits {
            bits: vec![0; index().count.div_ceil(64)],
            first_args: Vec::new(),
        }
    }

    pub fn all() -> CommandBits {
        let count = index().count;
        let mut bits = vec![u64::MAX; count.div_ceil(64)];
        if !count.is_multiple_of(64) {
            if let Some(last) = bits.last_mut() {
                *last = (1u64 << (count % 64)) - 1;
            }
        }
        CommandBits {
            bits,
            first_args: Vec::new(),
        }
    }

    pub fn is_all(&self) -> bool {
        self.bits == CommandBits::all().bits
    }

    /// Allows or forbids a command whole (its first-argument exceptions go).
    pub fn set(&mut self, id: usize, allow: bool) {
        if let Some(word) = self.bits.get_mut(id / 64) {
            if allow {
                *word |= 1 << (id % 64);
            } else {
                *word &= !(1 << (id % 64));
            }
        }
        self.first_args.retain(|(i, _)| *i != id);
    }

    pub fn allows(&self, id: usize) -> bool {
        self.bits
            .get(id / 64)
            .is_some_and(|word| word & (1 << (id % 64)) != 0)
    }

    /// Allows a command only with this first argument (`+select|0`); a
    /// command allowed whole stays so.
    pub fn allow_first_arg(&mut self, id: usize, arg: &[u8]) {
        if self.allows(id) {
            return;
        }
        match self.first_args.iter_mut().find(|(i, _)| *i == id) {
            Some((_, args)) => {
                if !args.iter().any(|a| a.eq_ignore_ascii_case(arg)) {
                    args.push(arg.to_vec());
                }
            }
            None => self.first_args.push((id, vec![arg.to_vec()])),
        }
    }

    /// Whether the command is allowed with this first argument.
    pub fn allows_first_arg(&self, id: usize, arg: Option<&[u8]>) -> bool {
        let Some(arg) = arg else { return false };
        self.first_args
            .iter()
            .find(|(i, _)| *i == id)
            .is_some_and(|(_, args)| args.iter().any(|a| a.eq_ignore_ascii_case(arg)))
    }
}
