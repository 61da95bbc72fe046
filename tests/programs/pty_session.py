#!/usr/bin/env python3
"""Drives `srun --pty bash` through a real terminal, as a person would: checks that the task has
a terminal of the right size that follows ours, that Ctrl-C and Ctrl-Z reach its foreground job,
and that srun ends with the shell's exit code. Usage: pty_session.py SRUN [ARGS...]
With PTY_PAUSE=PATH set it stops after the first command (creating PATH.ready) until PATH.go
exists: the test restarts the agents meanwhile, and the session must carry on as if nothing
happened."""
import fcntl
import os
import pty
import select
import signal
import struct
import sys
import termios
import time

pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:] + ["--pty", "bash", "--norc", "--noprofile", "-i"])

fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 132, 0, 0))
out = b""


def pump(until, timeout=10.0, since=0):
    """Reads the terminal until `until` has appeared in the output (after offset `since`)."""
    global out
    end = time.time() + timeout
    while until.encode() not in out[since:]:
        if time.time() > end:
            sys.exit("timed out waiting for %r; got:\n%s" % (until, out.decode(errors="replace")))
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                data = os.read(fd, 4096)
            except OSError:
                return
            if not data:
                return
            out += data


def say(line, until):
    """Types `line`, then reads until `until` appears in what comes after it."""
    since = len(out)
    os.write(fd, line.encode())
    pump(until, since=since)


# Typed before the shell is up, input may be flushed: wait for its prompt. Each check waits for
# output that differs from the echo of what was typed ($((...)) is expanded by the shell).
pump("bash-")
say("echo READY=$((40+2))\r", "READY=42")
# PTY_PAUSE=PATH: the test restarts the agents here (PATH.ready tells it when, PATH.go when done).
pause = os.environ.get("PTY_PAUSE")
if pause:
    open(pause + ".ready", "w").close()
    end = time.time() + 60
    while not os.path.exists(pause + ".go"):
        if time.time() > end:
            sys.exit("timed out waiting for %s.go" % pause)
        time.sleep(0.1)
say("echo TTY=$(tty) SIZE=$(stty size) JOB=$SLURM_JOB_ID END=$((1+1))\r", "END=2")
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 100, 0, 0))
os.kill(pid, signal.SIGWINCH)
# The new size travels srun -> agent -> the remote terminal: ask until it has arrived.
for attempt in range(50):
    marker = "END=%d" % (100 + attempt)
    say("echo RESIZED=$(stty size) END=$((100+%d))\r" % attempt, marker)
    if b"RESIZED=50 100" in out:
        break
    time.sleep(0.1)
# A foreground job that says when it runs, for the keys that act on it.
say("sh -c 'echo RUNNING=$((5+1)); exec sleep 30'\r", "RUNNING=6")
say("\x03", "^C")  # Ctrl-C: the remote line discipline interrupts it
say("echo INT=$? END=$((3+1))\r", "END=4")
say("sh -c 'echo RUNNING=$((6+1)); exec sleep 30'\r", "RUNNING=7")
say("\x1a", "Stopped")  # Ctrl-Z: job control in the remote shell
# Resumed in the foreground (a shell with a stopped job refuses the first `exit`), then
# interrupted again. (Killing the stopped job with `kill -9 %1` instead left bash listing it as
# stopped for good in about one run in ten under load, with no such trouble outside srun:
# not understood, noted in the issue.)
say("fg\r", "exec sleep 30")
time.sleep(0.3)  # bash has given it the terminal back
say("\x03", "^C")
say("echo RESUMED=$? END=$((4+1))\r", "RESUMED=130 END=5")
os.write(fd, b"exit 7\r")
end = time.time() + 10
while time.time() < end:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    r, _, _ = select.select([fd], [], [], 0.1)
    if r:
        try:
            out += os.read(fd, 4096)
        except OSError:
            pass
else:
    sys.exit("srun did not end after `exit 7`; the terminal showed:\n" +
             out.decode(errors="replace"))
text = out.decode(errors="replace")
sys.stdout.write(text + "\n")
print("EXIT=%d" % os.WEXITSTATUS(status))
