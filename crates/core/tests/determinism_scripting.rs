//! Determinism (docs/architecture.md) for scripts: two replicas applying the
//! same entries (EVAL, EVALSHA, FCALL with TIME, math.random, SRANDMEMBER,
//! SPOP and expiring keys inside scripts) with identical contexts give
//! identical replies at every step and end with equal digests; a replica
//! restored from a snapshot taken midway (script cache and libraries
//! included) continues in step; and the random draws really come from the
//! entry's seed.

mod common;

use common::{run_both, Rng};
use kvasir_core::{snapshot, Ctx, Store};
use kvasir_resp::Reply;

const SCRIPT: &str = "\
local n = math.random(1000) \
local t = redis.call('TIME') \
redis.call('sadd', KEYS[1], 'a', 'b', 'c', 'd', 'e', 'f', 'g', ARGV[1]) \
local picked = redis.call('srandmember', KEYS[1]) \
local popped = redis.call('spop', KEYS[1]) \
redis.call('set', KEYS[2], n .. ':' .. t[1] .. ':' .. picked, 'PX', 50) \
redis.call('hincrby', KEYS[3], popped or 'none', 1) \
return {n, picked, popped, redis.call('exists', KEYS[2])}";

const LIBRARY: &str = "#!lua name=det\n\
redis.register_function('bump', function(keys, args) \
  local v = redis.call('incrby', keys[1], math.random(10)) \
  redis.call('pexpire', keys[1], 30) \
  return v \
end)";

fn s(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

fn step_command(rng: &mut Rng, sha: &str, i: u64) -> Vec<String> {
    let k = rng.below(5);
    match rng.below(4) {
        0 => s(&[
            "EVAL",
            SCRIPT,
            "3",
            &format!("set{k}"),
            &format!("str{k}"),
            "hash",
            &i.to_string(),
        ]),
        1 => s(&[
            "EVALSHA",
            sha,
            "3",
            &format!("set{k}"),
            &format!("str{k}"),
            "hash",
            &i.to_string(),
        ]),
        2 => s(&["FCALL", "bump", "1", &format!("n{k}")]),
        _ => s(&["GET", &format!("str{k}")]),
    }
}

#[test]
fn scripts_apply_identically_on_two_replicas_and_after_a_snapshot() {
    let mut stores = [Store::new(1), Store::new(1)];
    let mut rng = Rng(0x5eed);
    let ctx0 = Ctx {
        now_ms: 1_000_000,
        seed: 1,
    };
    let sha = match run_both(&mut stores, &s(&["SCRIPT", "LOAD", SCRIPT]), &ctx0, 0) {
        Ok(Reply::Bulk(b)) => String::from_utf8(b.to_vec()).expect("hex"),
        other => panic!("script load: {other:?}"),
    };
    let loaded = run_both(&mut stores, &s(&["FUNCTION", "LOAD", LIBRARY]), &ctx0, 0);
    assert_eq!(loaded, Ok(Reply::bulk_str("det")));
    let mut restored: Option<Store> = None;
    for i in 1..600u64 {
        // Time moves on by 0-20 ms an entry, so keys set with PX expire
        // between entries.
        let ctx = Ctx {
            now_ms: 1_000_000 + i * 10 + rng.below(10),
            seed: rng.next(),
        };
        let cmd = step_command(&mut rng, &sha, i);
        let reply = run_both(&mut stores, &cmd, &ctx, i as usize);
        assert!(!matches!(reply, Ok(Reply::Error(_))), "{cmd:?}: {reply:?}");
        if let Some(r) = restored.as_mut() {
            let args = common::to_args(&cmd);
            assert_eq!(r.apply(0, &args, &ctx), reply, "restored replica, step {i}");
        }
        if i == 300 {
            let mut image = Vec::new();
            snapshot::encode(&stores[0], &mut image);
            restored = Some(snapshot::decode(&image).expect("snapshot decodes"));
        }
    }
    let digest = snapshot::digest(&stores[0]);
    assert_eq!(digest, snapshot::digest(&stores[1]));
    assert_eq!(Some(digest), restored.as_ref().map(snapshot::digest));
}

#[test]
fn random_draws_come_from_the_entry_seed() {
    let draw = |seed: u64| {
        let mut st = Store::new(1);
        let ctx = Ctx { now_ms: 5, seed };
        st.apply(
            0,
            &common::to_args(&s(&[
                "EVAL",
                "return {math.random(1000000), math.random(1000000)}",
                "0",
            ])),
            &ctx,
        )
    };
    assert_eq!(draw(7), draw(7));
    assert_ne!(draw(7), draw(8));
}

/// A script stopped by `script-max-instructions` stops at the same point on
/// a replica whose interpreter ran other scripts before (Lua's countdown to
/// the next hook call does not carry over from them) as on a fresh one,
/// such as a replica restarted from a snapshot.
#[test]
fn the_instruction_limit_stops_a_script_at_the_same_point_on_every_replica() {
    let ctx = Ctx { now_ms: 5, seed: 3 };
    let mut busy = Store::new(1);
    let mut fresh = Store::new(1);
    for st in [&mut busy, &mut fresh] {
        st.limits.script_max_instructions = 200_000;
    }
    // Only `busy` runs this: a few thousand instructions, so its countdown
    // would stand mid-way at the next run.
    let warm = "local x = 0 for i = 1, 777 do x = x + i end return x";
    let r = busy.apply(0, &common::to_args(&s(&["EVAL", warm, "0"])), &ctx);
    assert_eq!(r, Ok(Reply::Int(302_253)));
    let forever = "while true do redis.call('INCR', KEYS[1]) end";
    let args = common::to_args(&s(&["EVAL", forever, "1", "n"]));
    let (a, b) = (busy.apply(0, &args, &ctx), fresh.apply(0, &args, &ctx));
    assert!(
        matches!(&a, Ok(Reply::Error(e)) if e.contains("script-max-instructions")),
        "{a:?}"
    );
    assert_eq!(a, b);
    let get = common::to_args(&s(&["GET", "n"]));
    let (na, nb) = (busy.apply(0, &get, &ctx), fresh.apply(0, &get, &ctx));
    assert_eq!(
        na, nb,
        "the two replicas stopped the script at different points"
    );
}

/// Instructions run inside pcall (a coroutine of its own) or a script's
/// coroutines count towards the limit like any other: a loop of short
/// pcalls, each under the hook's interval, is stopped as early as the same
/// loop without pcall would be.
#[test]
fn instructions_in_short_pcalls_and_coroutines_count_towards_the_limit() {
    let ctx = Ctx { now_ms: 5, seed: 3 };
    for body in [
        "while true do redis.call('INCR', KEYS[1]) pcall(function() for i = 1, 1200 do end end) end",
        "while true do redis.call('INCR', KEYS[1]) coroutine.wrap(function() for i = 1, 1200 do end end)() end",
    ] {
        let mut st = Store::new(1);
        st.limits.script_max_instructions = 200_000;
        let r = st.apply(0, &common::to_args(&s(&["EVAL", body, "1", "n"])), &ctx);
        assert!(
            matches!(&r, Ok(Reply::Error(e)) if e.contains("script-max-instructions")),
            "{body}: {r:?}"
        );
        // A round runs about 1,250 instructions (the empty loop is one per
        // step): 200,000 allow about 160. Counted per coroutine from a
        // fresh interval, the pcall's 1,200 would never reach the hook and
        // the loop would run about 5,000 rounds.
        let rounds = st.apply(0, &common::to_args(&s(&["GET", "n"])), &ctx);
        let Ok(Reply::Bulk(n)) = rounds else {
            panic!("{body}: GET n = {rounds:?}");
        };
        let n: u64 = String::from_utf8_lossy(&n).parse().expect("a count");
        assert!((100..=250).contains(&n), "{body}: stopped after {n} rounds");
    }
}
