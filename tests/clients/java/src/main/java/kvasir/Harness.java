package kvasir;

import java.util.HashSet;
import java.util.Set;

import redis.clients.jedis.HostAndPort;

/** What the Jedis test programs share: checks, seeds, a watchdog, the result line. */
final class Harness {
    private static boolean failed = false;

    private Harness() {}

    /** Prints a PASS/FAIL line; a FAIL makes the program exit 1. */
    static boolean check(boolean ok, String what) {
        if (!ok) {
            failed = true;
        }
        System.out.println((ok ? "PASS: " : "FAIL: ") + what);
        return ok;
    }

    /** Seed nodes from PORT or HOST:PORT arguments; exits 2 without any. */
    static Set<HostAndPort> seeds(String[] args, String usage) {
        if (args.length == 0) {
            System.err.println("usage: " + usage);
            System.exit(2);
        }
        Set<HostAndPort> seeds = new HashSet<>();
        for (String a : args) {
            seeds.add(a.matches("\\d+") ? new HostAndPort("127.0.0.1", Integer.parseInt(a)) : HostAndPort.from(a));
        }
        return seeds;
    }

    /** Ends the process with a FAIL line if it runs longer than `seconds`. */
    static void watchdog(int seconds, String what) {
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(seconds * 1000L);
            } catch (InterruptedException e) {
                return;
            }
            System.out.println("FAIL: " + what + "deadline of " + seconds + "s exceeded");
            System.out.flush();
            Runtime.getRuntime().halt(1);
        });
        watchdog.setDaemon(true);
        watchdog.start();
    }

    /** Runs `body`, turning an exception into a FAIL, then prints the result and exits. */
    static void runAndExit(String label, Runnable body) {
        long started = System.nanoTime();
        try {
            body.run();
        } catch (Exception e) {
            check(false, "unexpected exception: " + e);
            e.printStackTrace(System.out);
        }
        System.out.printf("      %s took %.2fs%n", label, (System.nanoTime() - started) / 1e9);
        System.out.println("RESULT: " + label + " " + (failed ? "FAILED" : "PASSED"));
        System.out.flush();
        System.exit(failed ? 1 : 0);
    }
}
