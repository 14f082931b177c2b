// Cluster-client smoke test of Kvasir with go-redis v9 (redis.ClusterClient).
//
//	kvclient-go SCENARIO PORT|HOST:PORT...
//
// Scenarios:
//
//	basic     SET/GET of 1000 keys spread over the slots, a 100-command
//	          Pipelined batch, ForEachMaster sees 3 masters, and after FlushAll
//	          through ForEachMaster the masters' DBSIZE adds up to the keys
//	          written.
//	watch     the optimistic-locking increment of the go-redis docs (Watch +
//	          TxPipelined, retried on TxFailedErr) from several goroutines, the
//	          final value exact; then a forced conflict: a second client writes
//	          the watched key inside the Watch callback, so EXEC must fail with
//	          redis.TxFailedErr and the other client's value must stay.
//	failover  writes keys, prints "KILL host:port" (the master of a slot it
//	          wrote to) and "READY", then waits for the line GO on stdin (the
//	          test kills that node meanwhile). The same ClusterClient must then
//	          write again within a few seconds (the time that takes is printed
//	          as "RECOVERY_SECONDS x"; the test asserts on it), every
//	          acknowledged write (before and after the kill) must read back, and
//	          a final round must succeed without application-level retries.
//	          Then it prints "RESTART" and waits for GO again (the test
//	          restarts the node and waits for cluster_state:ok); while the
//	          restarted node takes back its shards' leadership, writes and
//	          MULTI/EXEC on its slot must keep succeeding (following MOVED),
//	          until the client sees the slot on that node again (within 30 s);
//	          everything written reads back.
//
// Every line of the outcome starts with PASS or FAIL; the exit code is 1 if any
// check failed, 2 on bad usage. Each scenario has an overall deadline, so the
// program never hangs.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

var failed bool

func pass(format string, a ...any) { fmt.Printf("PASS: "+format+"\n", a...) }

func fail(format string, a ...any) {
	failed = true
	fmt.Printf("FAIL: "+format+"\n", a...)
}

func info(format string, a ...any) { fmt.Printf("      "+format+"\n", a...) }

// check reports a PASS or FAIL line; it returns ok so callers can stop early.
func check(ok bool, what string, a ...any) bool {
	if ok {
		pass(what, a...)
	} else {
		fail(what, a...)
	}
	return ok
}

func newClient(addrs []string) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:        addrs,
		DialTimeout:  2 * time.Second,
		ReadTimeout:  3 * time.Second,
		WriteTimeout: 3 * time.Second,
	})
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: kvclient-go basic|watch|failover PORT|HOST:PORT...")
		os.Exit(2)
	}
	scenario := os.Args[1]
	var addrs []string
	for _, a := range os.Args[2:] {
		if _, err := strconv.Atoi(a); err == nil {
			a = "127.0.0.1:" + a
		}
		addrs = append(addrs, a)
	}
	budget := map[string]time.Duration{"basic": 60 * time.Second, "watch": 60 * time.Second, "failover": 180 * time.Second}
	d, ok := budget[scenario]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown scenario %q\n", scenario)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	switch scenario {
	case "basic":
		basic(ctx, addrs)
	case "watch":
		watch(ctx, addrs)
	case "failover":
		failover(ctx, addrs)
	}
	if ctx.Err() != nil {
		fail("%s: scenario deadline of %v exceeded", scenario, d)
	}
	info("%s took %.2fs", scenario, time.Since(start).Seconds())
	if failed {
		fmt.Printf("RESULT: %s FAILED\n", scenario)
		os.Exit(1)
	}
	fmt.Printf("RESULT: %s PASSED\n", scenario)
}

// ---------------------------------------------------------------------------

func basic(ctx context.Context, addrs []string) {
	rdb := newClient(addrs)
	defer rdb.Close()

	if err := rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.FlushAll(ctx).Err()
	}); !check(err == nil, "FlushAll via ForEachMaster (err=%v)", err) {
		return
	}

	const n = 1000
	slots := map[int64]bool{}
	var setErr, getErr error
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("go:basic:%d", i)
		if err := rdb.Set(ctx, k, "v"+strconv.Itoa(i), 0).Err(); err != nil && setErr == nil {
			setErr = fmt.Errorf("SET %s: %w", k, err)
		}
	}
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("go:basic:%d", i)
		v, err := rdb.Get(ctx, k).Result()
		if (err != nil || v != "v"+strconv.Itoa(i)) && getErr == nil {
			getErr = fmt.Errorf("GET %s = %q, %v", k, v, err)
		}
	}
	for i := 0; i < n; i += 10 {
		s, err := rdb.ClusterKeySlot(ctx, fmt.Sprintf("go:basic:%d", i)).Result()
		if err == nil {
			slots[s] = true
		}
	}
	check(setErr == nil, "SET %d keys (first error: %v)", n, setErr)
	check(getErr == nil, "GET %d keys read back (first error: %v)", n, getErr)
	check(len(slots) >= 90, "keys spread over slots (%d distinct slots in a sample of 100, per CLUSTER KEYSLOT)", len(slots))

	// A pipeline of 100 commands over many slots: 50 SETs of new keys, 25
	// INCRBYs of new counters, 25 GETs of keys written above.
	cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < 50; i++ {
			p.Set(ctx, fmt.Sprintf("go:pipe:%d", i), i, 0)
		}
		for i := 0; i < 25; i++ {
			p.IncrBy(ctx, fmt.Sprintf("go:pipe:ctr:%d", i), int64(i+1))
		}
		for i := 0; i < 25; i++ {
			p.Get(ctx, fmt.Sprintf("go:basic:%d", i*37))
		}
		return nil
	})
	pipeOK := err == nil && len(cmds) == 100
	var bad string
	if pipeOK {
		for i, c := range cmds {
			switch {
			case i < 50:
				if c.(*redis.StatusCmd).Val() != "OK" {
					bad = fmt.Sprintf("cmd %d %v", i, c)
				}
			case i < 75:
				if c.(*redis.IntCmd).Val() != int64(i-50+1) {
					bad = fmt.Sprintf("cmd %d %v", i, c)
				}
			default:
				if c.(*redis.StringCmd).Val() != "v"+strconv.Itoa((i-75)*37) {
					bad = fmt.Sprintf("cmd %d %v", i, c)
				}
			}
			if bad != "" {
				break
			}
		}
	}
	check(pipeOK && bad == "", "Pipelined 100 commands (err=%v, replies=%d, wrong=%q)", err, len(cmds), bad)
	for i := 0; i < 50 && pipeOK; i++ {
		if v, err := rdb.Get(ctx, fmt.Sprintf("go:pipe:%d", i)).Result(); err != nil || v != strconv.Itoa(i) {
			fail("pipelined SET go:pipe:%d not visible afterwards: %q, %v", i, v, err)
			break
		}
	}
	written := int64(n + 50 + 25)

	var masters []string
	var mu sync.Mutex
	err = rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		mu.Lock()
		masters = append(masters, m.Options().Addr)
		mu.Unlock()
		return nil
	})
	check(err == nil && len(masters) == 3, "ForEachMaster visits 3 masters (got %d: %v, err=%v)", len(masters), masters, err)

	var sum atomic.Int64
	var perMaster sync.Map
	err = rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		k, err := m.DBSize(ctx).Result()
		if err != nil {
			return fmt.Errorf("%s: %w", m.Options().Addr, err)
		}
		sum.Add(k)
		perMaster.Store(m.Options().Addr, k)
		return nil
	})
	per := map[string]int64{}
	perMaster.Range(func(k, v any) bool { per[k.(string)] = v.(int64); return true })
	check(err == nil && sum.Load() == written, "sum of DBSIZE over masters == %d keys written (got %d, per master %v, err=%v)", written, sum.Load(), per, err)
	allHave := len(per) == 3
	for _, v := range per {
		allHave = allHave && v > 0
	}
	check(allHave, "every master holds some of the keys (%v)", per)
}

// ---------------------------------------------------------------------------

// increment is the optimistic-locking example of the go-redis documentation:
// read the key under WATCH, write the incremented value in MULTI/EXEC, retry on
// redis.TxFailedErr. It returns how many times EXEC was aborted.
func increment(ctx context.Context, rdb *redis.ClusterClient, key string) (int, error) {
	const maxRetries = 1000
	txf := func(tx *redis.Tx) error {
		n, err := tx.Get(ctx, key).Int()
		if err != nil && err != redis.Nil {
			return err
		}
		n++
		_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.Set(ctx, key, n, 0)
			return nil
		})
		return err
	}
	for i := 0; i < maxRetries; i++ {
		err := rdb.Watch(ctx, txf, key)
		if err == nil {
			return i, nil
		}
		if errors.Is(err, redis.TxFailedErr) {
			continue
		}
		return i, err
	}
	return maxRetries, errors.New("increment reached maximum number of retries")
}

func watch(ctx context.Context, addrs []string) {
	rdb := newClient(addrs)
	defer rdb.Close()
	other := newClient(addrs)
	defer other.Close()

	const key = "go:watch:{counter}"
	const workers, each = 8, 25
	if err := rdb.Del(ctx, key).Err(); !check(err == nil, "DEL %s (err=%v)", key, err) {
		return
	}
	var wg sync.WaitGroup
	var aborted atomic.Int64
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				r, err := increment(ctx, rdb, key)
				aborted.Add(int64(r))
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	var first error
	nerr := 0
	for e := range errs {
		if first == nil {
			first = e
		}
		nerr++
	}
	check(nerr == 0, "%d goroutines x %d Watch/TxPipelined increments without error (%d failed, first: %v)", workers, each, nerr, first)
	got, err := rdb.Get(ctx, key).Int()
	check(err == nil && got == workers*each, "final counter == %d (got %d, err=%v; %d EXECs aborted by conflicts and retried)", workers*each, got, err, aborted.Load())

	// Forced conflict: another client writes the watched key between WATCH and
	// EXEC, so EXEC must abort.
	const ckey = "go:watch:{conflict}"
	if err := rdb.Set(ctx, ckey, "initial", 0).Err(); !check(err == nil, "SET %s (err=%v)", ckey, err) {
		return
	}
	var otherErr error
	var seen string
	ran := false
	err = rdb.Watch(ctx, func(tx *redis.Tx) error {
		ran = true
		v, err := tx.Get(ctx, ckey).Result()
		if err != nil {
			return err
		}
		seen = v
		otherErr = other.Set(ctx, ckey, "from-other-client", 0).Err()
		_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.Set(ctx, ckey, "from-transaction", 0)
			return nil
		})
		return err
	}, ckey)
	if !check(ran, "the Watch callback ran (Watch returned %v)", err) {
		return
	}
	check(otherErr == nil, "the other client's SET inside the Watch callback succeeded (err=%v)", otherErr)
	check(seen == "initial", "GET under WATCH saw %q (want \"initial\")", seen)
	check(errors.Is(err, redis.TxFailedErr), "TxPipelined after a conflicting write returns redis.TxFailedErr (got %v)", err)
	v, err := rdb.Get(ctx, ckey).Result()
	check(err == nil && v == "from-other-client", "the aborted transaction wrote nothing (value %q, err=%v)", v, err)

	// Without a conflict the same pattern commits.
	err = rdb.Watch(ctx, func(tx *redis.Tx) error {
		_, err := tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.Set(ctx, ckey, "from-transaction", 0)
			return nil
		})
		return err
	}, ckey)
	v, gerr := rdb.Get(ctx, ckey).Result()
	check(err == nil && gerr == nil && v == "from-transaction", "an unconflicted Watch/TxPipelined commits (err=%v, value %q, %v)", err, v, gerr)
}

// ---------------------------------------------------------------------------

// retrying runs op until it succeeds or the deadline passes; it returns the
// number of failed attempts, the first error and the last error.
func retrying(ctx context.Context, deadline time.Time, op func() error) (int, error, error) {
	fails := 0
	var first, last error
	for {
		err := op()
		if err == nil {
			return fails, first, nil
		}
		fails++
		if first == nil {
			first = err
		}
		last = err
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fails, first, last
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func failover(ctx context.Context, addrs []string) {
	// go-redis only re-reads the slot map on MOVED/ASK/READONLY replies or
	// when it is older than ClusterStateReloadInterval (60 s by default since
	// v9.22). A dead master answers nothing, so with the default the client
	// keeps dialing it for up to a minute (go-redis issue #3979; measured
	// against Kvasir: ~60 s of "connection refused" although the new leaders
	// were elected within about a second). A short interval is the documented
	// knob for that; with it the client recovers in about 1-2 s.
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                      addrs,
		DialTimeout:                1 * time.Second,
		ReadTimeout:                3 * time.Second,
		WriteTimeout:               3 * time.Second,
		ClusterStateReloadInterval: 1 * time.Second,
	})
	defer rdb.Close()

	const n = 300
	acked := map[string]string{}
	var firstErr error
	for i := 0; i < n; i++ {
		k, v := fmt.Sprintf("go:fo:before:%d", i), fmt.Sprintf("b%d", i)
		if err := rdb.Set(ctx, k, v, 0).Err(); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		acked[k] = v
	}
	if !check(len(acked) == n, "%d writes before the kill (first error: %v)", n, firstErr) {
		return
	}

	const probe = "go:fo:before:0"
	victim, err := rdb.MasterForKey(ctx, probe)
	if !check(err == nil, "master of %s's slot known (err=%v)", probe, err) {
		return
	}
	victimAddr := victim.Options().Addr
	probeSlot, _ := rdb.ClusterKeySlot(ctx, probe).Result()
	info("slot %d of %s is served by %s", probeSlot, probe, victimAddr)
	// Keys whose slot the victim masters right now: the ones that must move.
	var onVictim []string
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("go:fo:before:%d", i)
		if m, err := rdb.MasterForKey(ctx, k); err == nil && m.Options().Addr == victimAddr {
			onVictim = append(onVictim, k)
		}
	}
	info("%d of the %d keys are on %s", len(onVictim), n, victimAddr)
	fmt.Printf("KILL %s\nREADY\n", victimAddr)

	if !waitGo("the kill") {
		return
	}

	// The node is dead. Writes to its former slots must work again within a
	// few seconds on the same client object.
	t0 := time.Now()
	const recoverWithin = 15 * time.Second
	fails, first, last := retrying(ctx, t0.Add(recoverWithin), func() error {
		return rdb.Set(ctx, probe, "after-kill", 0).Err()
	})
	rec := time.Since(t0)
	fmt.Printf("RECOVERY_SECONDS %.3f\n", rec.Seconds())
	if !check(last == nil, "write to slot %d (master killed) succeeds again after %.2fs (%d failed attempts; first error: %v; last: %v)", probeSlot, rec.Seconds(), fails, first, last) {
		return
	}
	acked[probe] = "after-kill"
	if m, err := rdb.MasterForKey(ctx, probe); err == nil {
		info("slot %d is now served by %s", probeSlot, m.Options().Addr)
		check(m.Options().Addr != victimAddr, "client routes slot %d away from the killed node (now %s)", probeSlot, m.Options().Addr)
	}

	// Writes over all slots, each retried by the application for a bounded
	// time: all must be acknowledged.
	deadline := time.Now().Add(20 * time.Second)
	totalFails := 0
	var firstAfter error
	for i := 0; i < n; i++ {
		k, v := fmt.Sprintf("go:fo:after:%d", i), fmt.Sprintf("a%d", i)
		f, fe, le := retrying(ctx, deadline, func() error { return rdb.Set(ctx, k, v, 0).Err() })
		totalFails += f
		if firstAfter == nil {
			firstAfter = fe
		}
		if le != nil {
			fail("SET %s never succeeded within the deadline: %v", k, le)
			return
		}
		acked[k] = v
	}
	pass("%d writes after the kill acknowledged (%d attempts failed and were retried; first error: %v)", n, totalFails, firstAfter)

	// Every acknowledged write reads back.
	lost := 0
	var lostEx []string
	var readFails int
	for k, want := range acked {
		var got string
		f, _, le := retrying(ctx, time.Now().Add(5*time.Second), func() error {
			var err error
			got, err = rdb.Get(ctx, k).Result()
			return err
		})
		readFails += f
		if le != nil || got != want {
			lost++
			if len(lostEx) < 5 {
				lostEx = append(lostEx, fmt.Sprintf("%s=%q want %q (%v)", k, got, want, le))
			}
		}
	}
	check(lost == 0, "all %d acknowledged writes read back (%d missing or wrong: %v; %d read attempts retried)", len(acked), lost, lostEx, readFails)

	// Steady state: one more round must need no application retries.
	var steadyErr error
	for i := 0; i < 200 && steadyErr == nil; i++ {
		k := fmt.Sprintf("go:fo:steady:%d", i)
		if err := rdb.Set(ctx, k, "s", 0).Err(); err != nil {
			steadyErr = fmt.Errorf("SET %s: %w", k, err)
		} else if v, err := rdb.Get(ctx, k).Result(); err != nil || v != "s" {
			steadyErr = fmt.Errorf("GET %s = %q, %v", k, v, err)
		}
	}
	check(steadyErr == nil, "200 SET+GET after recovery with no application retries (err=%v)", steadyErr)
	var masters []string
	var mu sync.Mutex
	err = rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		mu.Lock()
		masters = append(masters, m.Options().Addr)
		mu.Unlock()
		return nil
	})
	info("masters after the kill: %v (err=%v)", masters, err)

	// The node comes back and, once caught up, takes back the leadership of
	// its preferred shards. Clients holding the old slot map are redirected
	// with MOVED (also at EXEC), and must follow without being recreated.
	fmt.Println("RESTART")
	if !waitGo("the restart") {
		return
	}
	t1 := time.Now()
	const tag = "{go:fo:before:0}" // hashes to probeSlot, the killed node's slot
	back := false
	round := 0
	written := map[string]string{}
	var backFails int
	var firstBackErr error
	for time.Since(t1) < 30*time.Second && ctx.Err() == nil {
		round++
		dl := time.Now().Add(15 * time.Second)
		for i := 0; i < 50; i++ {
			k, v := fmt.Sprintf("go:fo:back:%d:%d", round, i), fmt.Sprintf("r%d", round)
			f, fe, le := retrying(ctx, dl, func() error { return rdb.Set(ctx, k, v, 0).Err() })
			backFails += f
			if firstBackErr == nil {
				firstBackErr = fe
			}
			if le != nil {
				fail("SET %s during the leadership moves never succeeded: %v", k, le)
				return
			}
			written[k] = v
		}
		v := fmt.Sprintf("tx%d", round)
		f, fe, le := retrying(ctx, dl, func() error {
			_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, tag+":a", v, 0)
				p.Set(ctx, tag+":b", v, 0)
				return nil
			})
			return err
		})
		backFails += f
		if firstBackErr == nil {
			firstBackErr = fe
		}
		if le != nil {
			fail("MULTI/EXEC on slot %d during the leadership moves never succeeded: %v", probeSlot, le)
			return
		}
		written[tag+":a"], written[tag+":b"] = v, v
		if m, err := rdb.MasterForKey(ctx, probe); err == nil && m.Options().Addr == victimAddr {
			back = true
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	check(back, "slot %d is led by the restarted node %s again (after %.2fs, %d rounds of writes)", probeSlot, victimAddr, time.Since(t1).Seconds(), round)
	pass("%d writes and %d MULTI/EXEC on slot %d acknowledged while leadership moved back (%d attempts retried by the application; first error: %v)", 50*round, round, probeSlot, backFails, firstBackErr)
	lost = 0
	lostEx = nil
	for k, want := range written {
		got, err := rdb.Get(ctx, k).Result()
		if err != nil || got != want {
			lost++
			if len(lostEx) < 5 {
				lostEx = append(lostEx, fmt.Sprintf("%s=%q want %q (%v)", k, got, want, err))
			}
		}
	}
	check(lost == 0, "all %d keys written around the restart read back (%d missing or wrong: %v)", len(written), lost, lostEx)
	// Wait for the remaining leadership moves to settle, then no retries.
	time.Sleep(2 * time.Second)
	steadyErr = nil
	for i := 0; i < 200 && steadyErr == nil; i++ {
		k := fmt.Sprintf("go:fo:steady2:%d", i)
		if err := rdb.Set(ctx, k, "s", 0).Err(); err != nil {
			steadyErr = fmt.Errorf("SET %s: %w", k, err)
		}
	}
	if steadyErr == nil {
		_, steadyErr = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, tag+":a", "final", 0)
			p.Incr(ctx, tag+":n")
			return nil
		})
	}
	check(steadyErr == nil, "200 SET and a MULTI/EXEC after the restart with no application retries (err=%v)", steadyErr)
	masters = nil
	err = rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		mu.Lock()
		masters = append(masters, m.Options().Addr)
		mu.Unlock()
		return nil
	})
	info("masters after the restart: %v (err=%v)", masters, err)
}

var stdinLines = func() chan string {
	ch := make(chan string, 4)
	go func() {
		r := bufio.NewReader(os.Stdin)
		for {
			s, err := r.ReadString('\n')
			if s != "" {
				ch <- strings.TrimSpace(s)
			}
			if err != nil {
				close(ch)
				return
			}
		}
	}()
	return ch
}()

// waitGo waits (at most 90 s) for the line GO on stdin, sent by the test once
// it has done what the last printed line asked for.
func waitGo(after string) bool {
	select {
	case s, ok := <-stdinLines:
		if !ok || s != "GO" {
			fail("expected GO on stdin after %s, got %q (open=%v)", after, s, ok)
			return false
		}
		return true
	case <-time.After(90 * time.Second):
		fail("no GO on stdin within 90s after %s", after)
		return false
	}
}
