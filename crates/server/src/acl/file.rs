//! The ACL file (`aclfile`): one `user <name> <rule> ...` line per user,
//! read at start and by ACL LOAD (all or nothing: any bad line leaves the
//! users as they were), written by ACL SAVE (ACL LIST's lines, through a
//! temporary file renamed over the old one).

use super::user::User;
use std::fmt::Write as _;
use std::path::Path;

/// Parses an ACL file's text into its users, or Redis's error text (every
/// bad line, `<file>:<line>: <why>. `).
pub fn parse(text: &str, file_name: &str, all_channels: bool) -> Result<Vec<User>, String> {
    let mut users: Vec<User> = Vec::new();
    let mut errors = String::new();
    for (i, line) in text.split('\n').enumerate() {
        let line = line.trim_matches(|c| matches!(c, ' ' | '\t' | '\r'));
        if line.is_empty() {
            continue;
        }
        let line_no = i + 1;
        let Some(words) = crate::redis_conf::split_args(line) else {
            let _ = write!(errors, "{file_name}:{line_no}: Syntax error. ");
            continue;
        };
        if words.first().map(String::as_str) != Some("user") || words.len() < 2 {
            let _ = write!(
                errors,
                "{file_name}:{line_no} should start with user keyword followed by the username. "
            );
            continue;
        }
        let name = &words[1];
        if name.contains(' ') || name.contains('\0') {
            let _ = write!(errors, "{file_name}:{line_no}: Syntax error. ");
            continue;
        }
        if users.iter().any(|u| u.name == *name) {
            let _ = write!(
                errors,
                "WARNING: Duplicate user '{name}' found on line {line_no}. "
            );
            continue;
        }
        let mut user = User::new(name, all_channels);
        let mut bad = false;
        for rule in merge_selector_words(&words[2..]) {
            if let Err(e) = user.apply(rule.as_bytes(), all_channels) {
                let _ = write!(
                    errors,
                    "{file_name}:{line_no}: Error in applying operation '{rule}': {}. ",
                    e.text()
                );
                bad = true;
                break;
            }
        }
        if !bad {
            user.refresh();
            users.push(user);
        }
    }
    if errors.is_empty() {
        Ok(users)
    } else {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was \
             performed",
        );
        Err(errors)
    }
}

/// Joins `(+get` `~a*)` written as several words into one selector rule.
fn merge_selector_words(words: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut open = false;
    for w in words {
        if open {
            if let Some(last) = out.last_mut() {
                last.push(' ');
                last.push_str(w);
            }
            open = !w.ends_with(')');
        } else {
            out.push(w.clone());
            open = w.starts_with('(') && !w.ends_with(')');
        }
    }
    out
}

/// Writes the users (ACL LIST's lines) to `path`, replacing it whole.
pub fn save(path: &Path, lines: &[String]) -> std::io::Result<()> {
    let mut text = String::new();
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, text.as_bytes())?;
    if let Err(e) = std::fs::File::open(&tmp).and_then(|f| f.sync_all()) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_are_read_and_every_bad_line_reported() {
        let users = parse(
            "user alice on >pw ~* +@all\n\n  user bob off (+get ~b*)\r\n",
            "users.acl",
            false,
        )
        .unwrap();
        assert_eq!(users.len(), 2);
        assert!(users[0].accepts(b"pw"));
        assert_eq!(users[1].selectors.len(), 1);
        let err = parse(
            "user a on\nnotuser b\nuser a off\nuser c +nosuch\n",
            "users.acl",
            false,
        )
        .unwrap_err();
        assert_eq!(
            err,
            "users.acl:2 should start with user keyword followed by the username. \
             WARNING: Duplicate user 'a' found on line 3. \
             users.acl:4: Error in applying operation '+nosuch': Unknown command or category \
             name in ACL. WARNING: ACL errors detected, no change to the previously active ACL \
             rules was performed"
        );
    }
}
