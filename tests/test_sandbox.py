"""The sandbox runs programs in a limited subprocess and classifies how they ended."""

import os
import uuid


from infill.bench.sandbox import SandboxLimits, run_python

FAST = SandboxLimits(timeout_s=1.0)


def test_passing_program_captures_output():
    result = run_python("print('hello')\nassert sum([1, 2]) == 3\n", FAST)
    assert result.passed and result.status == "passed" and result.reason == ""
    assert result.stdout == "hello\n"


def test_failing_assert_reports_the_exception():
    result = run_python("assert 1 == 2, 'wrong answer'\n", FAST)
    assert result.status == "failed"
    assert result.reason == "AssertionError: wrong answer"


def test_syntax_error_fails():
    result = run_python("def f(:\n", FAST)
    assert result.status == "failed" and "SyntaxError" in result.reason


def test_infinite_loop_is_killed_within_timeout():
    result = run_python("while True:\n    pass\n", FAST)
    assert result.status == "timed out"
    assert result.duration_s < FAST.timeout_s + 1.0


def test_sleeping_program_is_killed_within_timeout():
    result = run_python("import time\ntime.sleep(60)\n", FAST)
    assert result.status == "timed out" and result.duration_s < FAST.timeout_s + 1.0


def test_fork_bomb_is_stopped():
    result = run_python("import os\nwhile True:\n    os.fork()\n", FAST)
    assert result.status == "failed" and "fork" in result.reason


def test_subprocess_is_stopped():
    result = run_python("import subprocess\nsubprocess.run(['true'])\n", FAST)
    assert result.status == "failed" and "Popen" in result.reason


def test_memory_hog_fails_fast():
    result = run_python("block = bytearray(2 << 30)  # over the 1 GiB address-space limit\n", FAST)
    assert result.status == "failed" and "MemoryError" in result.reason


def test_write_outside_working_directory_is_refused(tmp_path):
    target = tmp_path / f"escape-{uuid.uuid4().hex}.txt"
    result = run_python(f"open({str(target)!r}, 'w').write('x')\n", FAST)
    assert result.status == "failed" and "outside the working directory" in result.reason
    assert not target.exists()
    result = run_python(f"import os\nos.open({str(target)!r}, os.O_CREAT | os.O_WRONLY)\n", FAST)
    assert result.status == "failed" and not target.exists()


def test_write_inside_working_directory_is_allowed():
    result = run_python("open('scratch.txt', 'w').write('ok')\nprint(open('scratch.txt').read())\n", FAST)
    assert result.passed and result.stdout == "ok\n"


def test_socket_is_refused():
    result = run_python("import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)\n", FAST)
    assert result.status == "failed" and "socket" in result.reason


def test_exiting_early_is_not_a_pass():
    for source in ("import sys\nsys.exit(0)\n", "import os\nos._exit(0)\n", "exit(0)\n", "raise SystemExit\n"):
        assert run_python(source, FAST).status == "failed", source


def test_huge_output_is_truncated_and_limited():
    result = run_python("while True:\n    print('x' * 1000)\n", SandboxLimits(timeout_s=5.0, file_bytes=1 << 20))
    assert result.status == "failed"
    assert len(result.stdout) <= SandboxLimits().output_chars


def test_stdin_is_closed():
    assert run_python("input()\n", FAST).status == "failed"


def test_working_directory_is_fresh_and_removed():
    result = run_python("import os\nprint(os.getcwd())\nprint(os.listdir('.'))\n", FAST)
    cwd, listing = result.stdout.splitlines()
    assert listing == "[]" and cwd != os.getcwd()
    assert not os.path.exists(cwd)
