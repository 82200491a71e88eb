//! systemd's readiness protocol (`sd_notify`), without libsystemd.
//!
//! With `Type=notify`, systemd passes the path of a unix datagram socket in `NOTIFY_SOCKET`; the service sends
//! newline-separated `KEY=VALUE` assignments to it: `READY=1` once it serves, `STOPPING=1` when it begins to
//! shut down, `WATCHDOG=1` at least every `WATCHDOG_USEC` microseconds when `WatchdogSec=` is set, and
//! `STATUS=…` free text for `systemctl status`. A path starting with `@` names a socket in the abstract
//! namespace (Linux). Without the variable (not started by systemd, or `Type=simple`) every call is a no-op,
//! so the daemon calls these unconditionally.
//!
//! The protocol is a single datagram per message, so a plain [`std::os::unix::net::UnixDatagram`] does it; a
//! crate for this would add more than it saves.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::time::Duration;

/// Sends `state` (e.g. `"READY=1\nSTATUS=serving"`) to the socket named by `NOTIFY_SOCKET`. Returns `Ok(false)`
/// when the variable is unset or empty (nothing to do), `Ok(true)` once the datagram is sent.
pub fn notify(state: &str) -> io::Result<bool> {
    match std::env::var_os("NOTIFY_SOCKET") {
        Some(path) if !path.is_empty() => {
            send_to(Path::new(&path), state)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// `READY=1`: the service is up (channels connected).
pub fn ready() -> io::Result<bool> {
    notify("READY=1")
}

/// `STOPPING=1`: shutdown has begun.
pub fn stopping() -> io::Result<bool> {
    notify("STOPPING=1")
}

/// `WATCHDOG=1`: the keep-alive ping.
pub fn watchdog() -> io::Result<bool> {
    notify("WATCHDOG=1")
}

/// How often to send `WATCHDOG=1`: half of `WATCHDOG_USEC` (systemd's advice), or `None` when the watchdog is
/// off. When `WATCHDOG_PID` is set and is not this process, the watchdog is meant for another process.
pub fn watchdog_interval() -> Option<Duration> {
    let usec = std::env::var("WATCHDOG_USEC").ok();
    let pid = std::env::var("WATCHDOG_PID").ok();
    watchdog_interval_from(usec.as_deref(), pid.as_deref(), std::process::id())
}

/// [`watchdog_interval`] on explicit values (testable without touching the environment).
pub fn watchdog_interval_from(usec: Option<&str>, pid: Option<&str>, me: u32) -> Option<Duration> {
    if let Some(pid) = pid
        && pid.trim().parse::<u32>().ok() != Some(me)
    {
        return None;
    }
    let usec: u64 = usec?.trim().parse().ok().filter(|&u| u > 0)?;
    Some(Duration::from_micros(usec / 2))
}

/// Sends one datagram to the socket at `path` (`@name` = abstract namespace).
pub fn send_to(path: &Path, state: &str) -> io::Result<()> {
    let sock = UnixDatagram::unbound()?;
    let bytes = path.as_os_str().as_encoded_bytes();
    if let Some(name) = bytes.strip_prefix(b"@") {
        send_abstract(&sock, name, state)
    } else {
        sock.send_to(state.as_bytes(), path).map(|_| ())
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn send_abstract(sock: &UnixDatagram, name: &[u8], state: &str) -> io::Result<()> {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
    sock.send_to_addr(state.as_bytes(), &addr).map(|_| ())
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn send_abstract(_sock: &UnixDatagram, _name: &[u8], _state: &str) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "abstract unix sockets exist only on Linux",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_to_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let server = UnixDatagram::bind(&path).unwrap();
        send_to(&path, "READY=1\nSTATUS=up").unwrap();
        let mut buf = [0u8; 64];
        let n = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=up");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn sends_to_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("nanogate-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let server = UnixDatagram::bind_addr(&addr).unwrap();
        send_to(Path::new(&format!("@{name}")), "WATCHDOG=1").unwrap();
        let mut buf = [0u8; 64];
        let n = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"WATCHDOG=1");
    }

    #[test]
    fn missing_socket_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(send_to(&dir.path().join("nope.sock"), "READY=1").is_err());
    }

    #[test]
    fn watchdog_interval_is_half_and_checks_the_pid() {
        assert_eq!(
            watchdog_interval_from(Some("10000000"), None, 7),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            watchdog_interval_from(Some("10000000"), Some("7"), 7),
            Some(Duration::from_secs(5))
        );
        assert_eq!(watchdog_interval_from(Some("10000000"), Some("8"), 7), None);
        assert_eq!(watchdog_interval_from(None, None, 7), None);
        assert_eq!(watchdog_interval_from(Some("0"), None, 7), None);
        assert_eq!(watchdog_interval_from(Some("x"), None, 7), None);
    }
}
