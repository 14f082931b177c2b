//! Cluster mode against tiny fake cluster nodes (std threads speaking
//! RESP on loopback): the load generator reads CLUSTER SLOTS, follows
//! `-MOVED` (updating and refreshing its slot map) and `-ASK` (sending
//! `ASKING` first), and ends the run without errors. A real Redis Cluster
//! or Kvasir cluster is exercised by hand (see docs/benchmarks.md).

use clap::Parser;
use kvasir_bench::cli::BenchArgs;
use kvasir_bench::cluster::key_slot;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};

/// Reads one request (an array of bulk strings); None at end of stream.
fn read_request(r: &mut BufReader<TcpStream>) -> Option<Vec<Vec<u8>>> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let n: usize = line.trim().trim_start_matches('*').parse().ok()?;
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        line.clear();
        r.read_line(&mut line).ok()?;
        let len: usize = line.trim().trim_start_matches('$').parse().ok()?;
        let mut arg = vec![0; len + 2];
        r.read_exact(&mut arg).ok()?;
        arg.truncate(len);
        args.push(arg);
    }
    Some(args)
}

fn bulk(v: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", v.len()).into_bytes();
    out.extend_from_slice(v);
    out.extend_from_slice(b"\r\n");
    out
}

fn slots_reply(port: u16) -> Vec<u8> {
    format!("*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:{port}\r\n").into_bytes()
}

type Store = Arc<Mutex<HashMap<Vec<u8>, Vec<u8>>>>;

/// Per-connection state handed to a node's handler.
#[derive(Default)]
struct ConnState {
    asking: bool,
}

type Handler = dyn Fn(&[Vec<u8>], &mut ConnState) -> Vec<u8> + Send + Sync;

/// Starts a fake node; returns its port (the handler may learn the port of
/// its peer through shared atomics).
fn node(handler: Arc<Handler>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let h = handler.clone();
            std::thread::spawn(move || {
                let mut out = stream.try_clone().unwrap();
                let mut r = BufReader::new(stream);
                let mut st = ConnState::default();
                while let Some(req) = read_request(&mut r) {
                    if out.write_all(&h(&req, &mut st)).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

fn store_cmd(store: &Store, req: &[Vec<u8>]) -> Vec<u8> {
    let name = req[0].to_ascii_uppercase();
    match name.as_slice() {
        b"SET" => {
            store.lock().unwrap().insert(req[1].clone(), req[2].clone());
            b"+OK\r\n".to_vec()
        }
        b"GET" => match store.lock().unwrap().get(&req[1]) {
            Some(v) => bulk(v),
            None => b"$-1\r\n".to_vec(),
        },
        _ => b"+OK\r\n".to_vec(),
    }
}

fn run_bench(args: &[&str]) -> kvasir_bench::report::Report {
    let mut argv = vec!["kvasir bench"];
    argv.extend_from_slice(args);
    let args = BenchArgs::parse_from(argv);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(kvasir_bench::run(&args)).expect("run").report
}

#[test]
fn cluster_mode_follows_moved_and_refreshes_the_slot_map() {
    let store: Store = Default::default();
    let migrated = Arc::new(AtomicBool::new(false));
    let port_a = Arc::new(AtomicU16::new(0));
    let port_b = Arc::new(AtomicU16::new(0));
    let slots = {
        let (migrated, port_a, port_b) = (migrated.clone(), port_a.clone(), port_b.clone());
        move || {
            if migrated.load(Ordering::SeqCst) {
                slots_reply(port_b.load(Ordering::SeqCst))
            } else {
                slots_reply(port_a.load(Ordering::SeqCst))
            }
        }
    };
    let slots = Arc::new(slots);
    // Node A owned every slot; now each key answers MOVED to node B.
    let a = {
        let (slots, migrated, port_b) = (slots.clone(), migrated.clone(), port_b.clone());
        node(Arc::new(
            move |req: &[Vec<u8>], _: &mut ConnState| match req[0].to_ascii_uppercase().as_slice() {
                b"CLUSTER" => slots(),
                b"GET" | b"SET" => {
                    migrated.store(true, Ordering::SeqCst);
                    format!(
                        "-MOVED {} 127.0.0.1:{}\r\n",
                        key_slot(&req[1]),
                        port_b.load(Ordering::SeqCst)
                    )
                    .into_bytes()
                }
                _ => b"+OK\r\n".to_vec(),
            },
        ))
    };
    let b = {
        let (slots, store) = (slots.clone(), store.clone());
        node(Arc::new(move |req: &[Vec<u8>], _: &mut ConnState| {
            if req[0].eq_ignore_ascii_case(b"CLUSTER") {
                slots()
            } else {
                store_cmd(&store, req)
            }
        }))
    };
    port_a.store(a, Ordering::SeqCst);
    port_b.store(b, Ordering::SeqCst);
    let report = run_bench(&[
        "kv",
        "--cluster",
        "--port",
        &a.to_string(),
        "--writers",
        "1",
        "--readers",
        "2",
        "--keyspace",
        "300",
        "--duration",
        "1",
        "--no-progress",
    ]);
    assert!(report.ok, "{}", report.verdict());
    assert_eq!(report.errors.total, 0);
    assert!(report.runs[0].count("read") > 0 && report.runs[0].count("write") > 0);
    let redirects = report.redirects.expect("cluster counters");
    assert!(redirects["moved"].as_u64().unwrap() > 0, "{redirects}");
    assert!(
        redirects["map_refreshes"].as_u64().unwrap() >= 2,
        "{redirects}"
    );
    // Every key the load wrote went to node B.
    assert_eq!(store.lock().unwrap().len(), 300);
}

#[test]
fn cluster_mode_follows_ask_with_asking() {
    let store: Store = Default::default();
    let port_a = Arc::new(AtomicU16::new(0));
    let port_b = Arc::new(AtomicU16::new(0));
    // Node A owns every slot but GETs are being imported by node B: ASK.
    let a = {
        let (store, port_a, port_b) = (store.clone(), port_a.clone(), port_b.clone());
        node(Arc::new(
            move |req: &[Vec<u8>], _: &mut ConnState| match req[0].to_ascii_uppercase().as_slice() {
                b"CLUSTER" => slots_reply(port_a.load(Ordering::SeqCst)),
                b"GET" => format!(
                    "-ASK {} 127.0.0.1:{}\r\n",
                    key_slot(&req[1]),
                    port_b.load(Ordering::SeqCst)
                )
                .into_bytes(),
                _ => store_cmd(&store, req),
            },
        ))
    };
    // Node B serves a GET only right after ASKING on the same connection.
    let b = {
        let (store, port_a) = (store.clone(), port_a.clone());
        node(Arc::new(
            move |req: &[Vec<u8>], st: &mut ConnState| match req[0].to_ascii_uppercase().as_slice()
            {
                b"ASKING" => {
                    st.asking = true;
                    b"+OK\r\n".to_vec()
                }
                b"GET" if st.asking => {
                    st.asking = false;
                    store_cmd(&store, req)
                }
                b"CLUSTER" => slots_reply(port_a.load(Ordering::SeqCst)),
                _ => format!(
                    "-MOVED {} 127.0.0.1:{}\r\n",
                    key_slot(&req[1]),
                    port_a.load(Ordering::SeqCst)
                )
                .into_bytes(),
            },
        ))
    };
    port_a.store(a, Ordering::SeqCst);
    port_b.store(b, Ordering::SeqCst);
    let report = run_bench(&[
        "kv",
        "--cluster",
        "--port",
        &a.to_string(),
        "--writers",
        "0",
        "--readers",
        "2",
        "--keyspace",
        "100",
        "--duration",
        "1",
        "--no-progress",
    ]);
    assert!(report.ok, "{}", report.verdict());
    assert!(report.runs[0].count("read") > 0);
    let redirects = report.redirects.expect("cluster counters");
    assert!(redirects["ask"].as_u64().unwrap() > 0, "{redirects}");
    assert_eq!(redirects["moved"], 0, "{redirects}");
}

#[test]
fn cluster_mode_needs_a_cluster() {
    // A plain server answers CLUSTER SLOTS with an error: the run cannot start.
    let plain = node(Arc::new(|req: &[Vec<u8>], _: &mut ConnState| {
        if req[0].eq_ignore_ascii_case(b"CLUSTER") {
            b"-ERR This instance has cluster support disabled\r\n".to_vec()
        } else {
            b"+OK\r\n".to_vec()
        }
    }));
    let args = BenchArgs::parse_from([
        "kvasir bench",
        "kv",
        "--cluster",
        "--port",
        &plain.to_string(),
        "--duration",
        "1",
    ]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let err = rt.block_on(kvasir_bench::run(&args)).err().expect("no run");
    assert!(err.contains("cluster support disabled"), "{err}");
}
