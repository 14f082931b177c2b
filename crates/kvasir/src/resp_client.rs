//! A minimal blocking RESP2 client for the `kvasir demo` and `kvasir
//! cluster status` tools: one connection, one command at a time, bounded
//! by timeouts so an unresponsive node never hangs the tool.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// A RESP2 reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Value>>),
}

impl Value {
    /// The reply as text (simple and bulk strings), if it is one.
    pub fn text(&self) -> Option<String> {
        match self {
            Value::Simple(s) => Some(s.clone()),
            Value::Bulk(Some(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }
}

pub struct Conn {
    addr: String,
    reader: BufReader<TcpStream>,
}

impl Conn {
    /// Connects to `addr` (`host:port`) within `timeout`; every later read
    /// and write is bounded by the same timeout.
    pub fn connect(addr: &str, timeout: Duration) -> Result<Conn, String> {
        let sock = addr
            .to_socket_addrs()
            .map_err(|e| format!("bad address {addr}: {e}"))?
            .next()
            .ok_or_else(|| format!("bad address {addr}: it resolves to nothing"))?;
        let stream = TcpStream::connect_timeout(&sock, timeout)
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        let _ = stream.set_nodelay(true);
        stream
            .set_read_timeout(Some(timeout))
            .and_then(|_| stream.set_write_timeout(Some(timeout)))
            .map_err(|e| format!("{addr}: {e}"))?;
        Ok(Conn {
            addr: addr.to_string(),
            reader: BufReader::new(stream),
        })
    }

    /// Sends one command and reads its reply (an error reply is a
    /// `Value::Error`, not an `Err`; `Err` means the connection failed).
    pub fn call(&mut self, args: &[&str]) -> Result<Value, String> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        self.reader
            .get_mut()
            .write_all(&out)
            .map_err(|e| format!("{}: {e}", self.addr))?;
        read_value(&mut self.reader).map_err(|e| format!("{}: {e}", self.addr))
    }

    /// A command whose reply must be text (INFO, CLUSTER INFO/NODES).
    pub fn call_text(&mut self, args: &[&str]) -> Result<String, String> {
        match self.call(args)? {
            Value::Error(e) => Err(e),
            v => v
                .text()
                .ok_or_else(|| format!("{}: unexpected reply to {}", self.addr, args.join(" "))),
        }
    }
}

fn read_line(r: &mut impl BufRead) -> Result<String, String> {
    let mut line = Vec::new();
    let n = r.read_until(b'\n', &mut line).map_err(|e| e.to_string())?;
    if n == 0 {
        return Err("connection closed".into());
    }
    if !line.ends_with(b"\r\n") {
        return Err("malformed reply".into());
    }
    line.truncate(line.len() - 2);
    Ok(String::from_utf8_lossy(&line).into_owned())
}

fn read_value(r: &mut impl BufRead) -> Result<Value, String> {
    let line = read_line(r)?;
    let (kind, rest) = line.split_at(line.len().min(1));
    let num = || {
        rest.parse::<i64>()
            .map_err(|_| format!("malformed reply {line:?}"))
    };
    Ok(match kind {
        "+" => Value::Simple(rest.to_string()),
        "-" => Value::Error(rest.to_string()),
        ":" => Value::Int(num()?),
        "$" => {
            let n = num()?;
            if n < 0 {
                Value::Bulk(None)
            } else {
                let mut buf = vec![0u8; n as usize + 2];
                r.read_exact(&mut buf).map_err(|e| e.to_string())?;
                buf.truncate(n as usize);
                Value::Bulk(Some(buf))
            }
        }
        "*" => {
            let n = num()?;
            if n < 0 {
                Value::Array(None)
            } else {
                let mut items = Vec::with_capacity(n.min(4096) as usize);
                for _ in 0..n {
                    items.push(read_value(r)?);
                }
                Value::Array(Some(items))
            }
        }
        _ => return Err(format!("unexpected reply {line:?}")),
    })
}

/// `field:value` lines of an INFO or CLUSTER INFO reply.
pub fn info_fields(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.trim_end().split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub fn info_get<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nested_replies() {
        let raw = b"*3\r\n$5\r\nslots\r\n*2\r\n:0\r\n:682\r\n-ERR no\r\n";
        let v = read_value(&mut &raw[..]).unwrap();
        let Value::Array(Some(items)) = v else {
            panic!("not an array: {v:?}")
        };
        assert_eq!(items.len(), 3);
        assert_eq!(items[0].text().as_deref(), Some("slots"));
        assert!(matches!(&items[1], Value::Array(Some(a)) if a.len() == 2));
        assert_eq!(items[2], Value::Error("ERR no".into()));
        let nil = read_value(&mut &b"$-1\r\n"[..]).unwrap();
        assert_eq!(nil, Value::Bulk(None));
    }

    #[test]
    fn reads_info_fields() {
        let f = info_fields("# Cluster\r\ncluster_enabled:1\r\ngroup1:role=leader,term=2\r\n");
        assert_eq!(info_get(&f, "cluster_enabled"), Some("1"));
        assert_eq!(info_get(&f, "group1"), Some("role=leader,term=2"));
    }
}
