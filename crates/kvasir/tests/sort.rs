//! SORT and SORT_RO run side by side against Kvasir and a real
//! `redis-server` (7.0): lists, sets and sorted sets of numbers and
//! strings, ALPHA, DESC, LIMIT edge cases, BY (string keys, hash fields,
//! nosort), GET (several patterns, `#`, `->`, missing values), STORE (and
//! an empty result), SORT_RO and the errors must get identical replies.
//!
//! Needs `redis-server` on PATH (scripts/install-test-deps.sh); fails, does
//! not skip, when it is missing.

mod common;

use common::redis_server::{run, start_redis};
use common::Kvasir;

fn script() -> Vec<Vec<String>> {
    let mut s: Vec<Vec<String>> = Vec::new();
    let mut line = |words: &[&str]| s.push(words.iter().map(|w| w.to_string()).collect());
    // Data.
    line(&[
        "RPUSH", "nums", "3", "-1", "10", "2.5", "1e2", "0x10", " 7", "3", "-inf", "+inf",
    ]);
    line(&[
        "RPUSH", "words", "pear", "apple", "Banana", "apple", "cherry", "10", "9", "",
    ]);
    line(&["RPUSH", "bad", "1", "2", "x"]);
    line(&["RPUSH", "ids", "1", "2", "3", "4", "5"]);
    line(&["SADD", "iset", "5", "3", "100", "-2", "42"]);
    line(&["SADD", "sset", "delta", "alpha", "charlie", "bravo"]);
    line(&[
        "ZADD", "z", "1", "c", "2", "a", "3", "d", "4", "b", "5", "e",
    ]);
    line(&[
        "ZADD", "zn", "5", "10", "4", "20", "3", "3", "2", "1", "1", "7",
    ]);
    line(&[
        "MSET", "w_1", "50", "w_2", "10", "w_3", "30", "w_4", "10", "w_5", "x",
    ]);
    line(&["MSET", "v_1", "50", "v_2", "10", "v_3", "30", "v_4", "10"]);
    line(&[
        "MSET", "n_1", "one", "n_2", "two", "n_3", "three", "n_5", "five",
    ]);
    line(&["HSET", "h_1", "age", "30", "name", "ann"]);
    line(&["HSET", "h_2", "age", "20", "name", "bob"]);
    line(&["HSET", "h_3", "age", "40"]);
    line(&["HSET", "h_4", "age", "20", "name", "dan"]);
    line(&["MSET", "wa", "b", "wb", "a", "wc", "a"]);
    line(&["SET", "str", "x"]);
    line(&["HSET", "hash", "f", "v"]);
    for key in [
        "nums", "words", "ids", "iset", "sset", "z", "zn", "missing", "bad",
    ] {
        for opts in [
            &[][..],
            &["ALPHA"],
            &["DESC"],
            &["ALPHA", "DESC"],
            &["LIMIT", "0", "3"],
            &["LIMIT", "2", "3", "ALPHA"],
            &["LIMIT", "-1", "2"],
            &["LIMIT", "1", "-1"],
            &["LIMIT", "0", "0"],
            &["LIMIT", "100", "5"],
            &["LIMIT", "3", "9223372036854775807"],
            &["LIMIT", "-9223372036854775808", "2"],
            &["DESC", "LIMIT", "1", "2", "ALPHA"],
            &["BY", "nosort"],
            &["BY", "nosort", "DESC"],
            &["BY", "nosort", "LIMIT", "1", "2"],
            &["BY", "nosort", "DESC", "LIMIT", "1", "2"],
            &["BY", "nosort", "LIMIT", "10", "2"],
            &["BY", "nosort", "LIMIT", "0", "0"],
            &["BY", "nosort", "LIMIT", "-3", "-1", "DESC"],
            &["GET", "#"],
            &["ALPHA", "GET", "n_*", "GET", "#"],
        ] {
            // A set's own order (BY nosort without STORE) is its iteration
            // order: Redis 7.0 keeps small string sets in a hash table whose
            // order Kvasir's listpack does not reproduce (SMEMBERS alike).
            if key == "sset" && opts.first() == Some(&"BY") {
                continue;
            }
            let mut w = vec!["SORT", key];
            w.extend_from_slice(opts);
            line(&w);
            w[0] = "SORT_RO";
            line(&w);
        }
    }
    for cmd in [
        &["SORT", "ids", "BY", "w_*"][..],
        &["SORT", "ids", "BY", "v_*"],
        &["SORT", "ids", "BY", "v_*", "DESC"],
        &["SORT", "ids", "BY", "v_*", "LIMIT", "1", "2"],
        &["SORT", "ids", "BY", "v_*", "ALPHA"],
        &["SORT", "ids", "BY", "n_*", "ALPHA"],
        &["SORT", "ids", "BY", "n_*", "ALPHA", "DESC"],
        &["SORT", "ids", "BY", "h_*->age"],
        &[
            "SORT",
            "ids",
            "BY",
            "h_*->age",
            "DESC",
            "GET",
            "#",
            "GET",
            "h_*->name",
        ],
        &[
            "SORT",
            "ids",
            "BY",
            "h_*->age",
            "GET",
            "h_*->name",
            "GET",
            "n_*",
            "GET",
            "#",
        ],
        &["SORT", "ids", "BY", "h_*->", "GET", "h_*->"],
        &[
            "SORT",
            "ids",
            "GET",
            "h_*->missing",
            "GET",
            "nothing",
            "GET",
            "w_*",
        ],
        &["SORT", "ids", "GET", "h_*", "GET", "n_*->x"],
        &["SORT", "ids", "LIMIT", "1", "3", "GET", "n_*"],
        &["SORT", "iset", "BY", "v_*"],
        &["SORT", "sset", "BY", "nosort", "STORE", "dst"],
        // In a script a set BY nosort is sorted ALPHA (Redis's
        // CLIENT_SCRIPT rule), so scripts see one order: integers as
        // strings, DESC and LIMIT honoured, string sets too.
        &[
            "EVAL",
            "return redis.call('SORT', KEYS[1], 'BY', 'nosort')",
            "1",
            "iset",
        ],
        &[
            "EVAL",
            "return redis.call('SORT', KEYS[1], 'BY', 'nosort')",
            "1",
            "sset",
        ],
        &[
            "EVAL",
            "return redis.call('SORT', KEYS[1], 'BY', 'nosort', 'DESC', 'LIMIT', 1, 3)",
            "1",
            "iset",
        ],
        &[
            "EVAL_RO",
            "return redis.call('SORT_RO', KEYS[1], 'BY', 'nosort')",
            "1",
            "iset",
        ],
        &[
            "EVAL",
            "return redis.call('SORT', KEYS[1], 'BY', 'nosort')",
            "1",
            "z",
        ],
        &[
            "EVAL",
            "return redis.call('SORT', KEYS[1], 'BY', 'nosort')",
            "1",
            "nums",
        ],
        // Outside a script again: the intset's own (ascending) order.
        &["SORT", "iset", "BY", "nosort"],
        &["LRANGE", "dst", "0", "-1"],
        &[
            "SORT", "z", "BY", "nosort", "DESC", "LIMIT", "1", "3", "GET", "#",
        ],
        &["SORT", "zn", "BY", "nosort", "LIMIT", "1", "3"],
        &["SORT", "nums", "STORE", "dst"],
        &["LRANGE", "dst", "0", "-1"],
        &["TYPE", "dst"],
        &[
            "SORT",
            "ids",
            "BY",
            "h_*->age",
            "GET",
            "h_*->name",
            "STORE",
            "dst",
        ],
        &["LRANGE", "dst", "0", "-1"],
        &["SORT", "words", "ALPHA", "LIMIT", "0", "0", "STORE", "dst"],
        &["EXISTS", "dst"],
        &["SORT", "missing", "STORE", "str"],
        &["EXISTS", "str"],
        &["SET", "str", "x"],
        &["SORT", "ids", "STORE", "str"],
        &["TYPE", "str"],
        &["SET", "str", "x"],
        &["SORT", "ids", "STORE", "a", "STORE", "b"],
        &["EXISTS", "a", "b"],
        &["SORT", "ids", "STORE", "ids", "DESC"],
        &["LRANGE", "ids", "0", "-1"],
        &["SORT", "bad", "STORE", "dst"],
        &["SORT", "str"],
        &["SORT", "hash"],
        &["SORT_RO", "str"],
        &["SORT", "ids", "LIMIT"],
        &["SORT", "ids", "LIMIT", "1"],
        &["SORT", "ids", "LIMIT", "a", "1"],
        &["SORT", "ids", "LIMIT", "1", "1.5"],
        &["SORT", "ids", "BY"],
        &["SORT", "ids", "GET"],
        &["SORT", "ids", "STORE"],
        &["SORT", "ids", "foo"],
        &["SORT_RO", "ids", "STORE", "dst"],
        &["SORT", "str", "foo"],
        &["SORT", "str", "LIMIT", "x", "1"],
        &["SORT"],
        &["SORT_RO"],
        &[
            "SORT", "ids", "asc", "desc", "alpha", "by", "NOSORT", "get", "#",
        ],
    ] {
        line(cmd);
    }
    s
}

#[test]
fn sort_matches_redis() {
    let (mut redis_guard, redis_port) = start_redis();
    let kvasir = Kvasir::start(&[]);
    let mut real = redis::Client::open(format!("redis://127.0.0.1:{redis_port}/"))
        .and_then(|c| c.get_connection())
        .expect("connect to redis-server");
    let mut ours = kvasir.conn();

    let script = script();
    let mut mismatches = Vec::new();
    let (mut errors, mut nonempty) = (0, 0);
    for args in &script {
        let want = run(&mut real, args);
        let got = run(&mut ours, args);
        errors += usize::from(want.is_err());
        nonempty += usize::from(matches!(&want, Ok(redis::Value::Array(v)) if v.len() > 1));
        if want != got {
            mismatches.push(format!("{args:?}\n  redis:  {want:?}\n  kvasir: {got:?}"));
        }
    }
    eprintln!(
        "{} commands, {errors} errors, {nonempty} non-trivial replies",
        script.len()
    );
    assert!(
        mismatches.is_empty(),
        "{} of {} replies differ:\n{}",
        mismatches.len(),
        script.len(),
        mismatches
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        errors >= 30 && nonempty >= 150,
        "{errors} errors, {nonempty} arrays"
    );
    if let Some(mut child) = redis_guard.0.take() {
        let _ = child.kill();
        let _ = child.wait();
    }
    drop(kvasir);
}
