//! `supervised systemd|auto`: tells systemd when the server is ready and
//! when it stops, through the datagram socket named in NOTIFY_SOCKET, as
//! redis-server does. A `Type=notify` unit (Debian's redis-server.service
//! starts `redis-server ... --supervised systemd`) waits for READY=1 and
//! kills a server that never sends it.

use crate::config::Config;
use std::os::unix::net::UnixDatagram;
use tracing::warn;

/// The supervisor the server reports to, from `supervised` and the
/// environment (`auto` picks systemd when NOTIFY_SOCKET is set).
pub fn supervisor(config: &Config) -> Option<&'static str> {
    let socket = std::env::var_os("NOTIFY_SOCKET").is_some();
    match config.stored.get("supervised").unwrap_or("no") {
        "systemd" => Some("systemd"),
        "auto" if socket => Some("systemd"),
        "upstart" => Some("upstart"),
        _ => None,
    }
}

/// Sends `state` (`READY=1`, `STOPPING=1`, `STATUS=...`, one per line) to
/// systemd; nothing when the server is not supervised by it.
pub fn notify(config: &Config, state: &str) {
    if supervisor(config) != Some("systemd") {
        return;
    }
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        warn!("systemd supervision requested or auto-detected, but NOTIFY_SOCKET not found!");
        return;
    };
    let path = path.to_string_lossy().into_owned();
    if let Err(e) = send(&path, state) {
        warn!("Can't send notification to systemd: {e}");
    }
}

fn send(path: &str, state: &str) -> std::io::Result<()> {
    let socket = UnixDatagram::unbound()?;
    // `@name`: a socket in the abstract namespace.
    if let Some(name) = path.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
        socket.send_to_addr(state.as_bytes(), &addr)?;
    } else {
        socket.send_to(state.as_bytes(), path)?;
    }
    Ok(())
}
