//! docs/commands.md, generated from the command table.

use kvasir_core::table::all_commands;
use kvasir_core::CommandSpec;
use std::fmt::Write;

fn arity(a: i32) -> String {
    if a < 0 {
        format!(">= {}", -a)
    } else {
        a.to_string()
    }
}

fn keys(c: &CommandSpec) -> String {
    if c.first_key <= 0 {
        "-".to_string()
    } else {
        format!("{},{},{}", c.first_key, c.last_key, c.step)
    }
}

fn row(out: &mut String, c: &CommandSpec, parent: Option<&CommandSpec>) {
    let name = match parent {
        Some(p) => format!("{} {}", p.name.to_uppercase(), c.name.to_uppercase()),
        None => c.name.to_uppercase(),
    };
    let _ = writeln!(
        out,
        "| {} | {} | {} | {} | {} | {} |",
        name,
        c.group,
        arity(c.arity),
        c.flags.names().join(" "),
        keys(c),
        c.summary
    );
}

/// The whole markdown page.
pub fn markdown() -> String {
    let mut out = String::new();
    out.push_str("# Supported commands\n\n");
    out.push_str("Generated from the command table by `kvasir commands --markdown`; a test checks it is current.\n");
    out.push_str("Arity follows Redis: N means exactly N arguments including the name, >= N at least N. Keys: first,last,step.\n\n");
    out.push_str(
        "| Command | Group | Arity | Flags | Keys | Summary |\n|---|---|---|---|---|---|\n",
    );
    for c in all_commands() {
        row(&mut out, c, None);
        for s in c.subcommands {
            row(&mut out, s, Some(c));
        }
    }
    out
}
