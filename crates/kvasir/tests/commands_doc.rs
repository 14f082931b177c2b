//! docs/commands.md is generated from the command table; this test fails
//! when the file is stale.

use std::process::Command;

#[test]
fn commands_md_matches_the_command_table() {
    let out = Command::new(env!("CARGO_BIN_EXE_kvasir"))
        .args(["commands", "--markdown"])
        .output()
        .expect("run kvasir commands");
    assert!(out.status.success());
    let generated = String::from_utf8(out.stdout).expect("utf8");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/commands.md");
    let on_disk = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        generated == on_disk,
        "docs/commands.md is stale: run `cargo run -p kvasir -- commands --markdown > docs/commands.md`"
    );
    for name in ["GET", "SET", "CLIENT SETNAME", "COMMAND GETKEYS"] {
        assert!(generated.contains(&format!("| {name} |")), "{name} missing");
    }
}
