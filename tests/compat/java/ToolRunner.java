import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.FileInputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

import org.apache.kafka.common.utils.Exit;

/**
 * Runs Kafka's command-line tools (their main classes, as bin/kafka-*.sh runs them) one after another in one JVM,
 * as Kafka's own tests do: a tool's exit is caught (Exit's procedure throws), its output captured. A tool that
 * catches everything (TopicCommand's mainNoExit) sees that throw and exits again: its first exit code counts.
 *
 * <p>Standard input: one command per line, the tool's class and its arguments separated by tabs, optionally after a
 * field {@code stdin=PATH} (the file the tool reads as its standard input). Standard output: one JSON object per
 * command, {"code": exit code, "out": ..., "err": ...}, written when the command ends, so a caller may send the
 * next command after reading the answer to the last.
 */
public final class ToolRunner {
    private static final class Exited extends RuntimeException {
        final int code;

        Exited(int code) {
            super("exit " + code);
            this.code = code;
        }
    }

    private static Integer firstExit;

    private static void exit(int code) {
        if (firstExit == null) {
            firstExit = code;
        }
        throw new Exited(code);
    }

    public static void main(String[] args) throws Exception {
        Exit.setExitProcedure((code, message) -> exit(code));
        Exit.setHaltProcedure((code, message) -> exit(code));
        PrintStream stdout = System.out;
        PrintStream stderr = System.err;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String[] parts = line.split("\t", -1);
            InputStream stdin = System.in;
            if (parts[0].startsWith("stdin=")) {
                System.setIn(new FileInputStream(parts[0].substring("stdin=".length())));
                parts = Arrays.copyOfRange(parts, 1, parts.length);
            }
            final String[] command = parts;
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
            PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8);
            int code = 0;
            System.setOut(o);
            System.setErr(e);
            try {
                // Scala tools print through scala.Console, which keeps the stream it found first
                code = scala.Console$.MODULE$.withOut(o, () -> scala.Console$.MODULE$.withErr(e, () -> run(command)));
            } finally {
                if (System.in != stdin) {
                    System.in.close();
                    System.setIn(stdin);
                }
                o.flush();
                e.flush();
                System.setOut(stdout);
                System.setErr(stderr);
            }
            stdout.println("{\"code\": " + code + ", \"out\": " + json(out.toString(StandardCharsets.UTF_8))
                           + ", \"err\": " + json(err.toString(StandardCharsets.UTF_8)) + "}");
            stdout.flush();
        }
    }

    private static int run(String[] parts) {
        firstExit = null;
        try {
            Class.forName(parts[0]).getMethod("main", String[].class)
                 .invoke(null, (Object) Arrays.copyOfRange(parts, 1, parts.length));
            return firstExit == null ? 0 : firstExit;
        } catch (InvocationTargetException ex) {
            Throwable cause = ex.getCause();
            if (cause instanceof Exited) {
                return firstExit;
            }
            cause.printStackTrace();
            return 99;
        } catch (ReflectiveOperationException ex) {
            ex.printStackTrace();
            return 98;
        }
    }

    static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
            }
        }
        return b.append('"').toString();
    }
}
