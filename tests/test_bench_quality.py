from celeris_complete.bench.quality import candidate, load_tasks, run_program


def program(task, text):
    return f"{task['prompt']}{text}{task['suffix']}\n{task['test']}\ncheck({task['entry_point']})\n"


def test_canonical_solutions_pass_and_wrong_ones_fail():
    tasks = load_tasks("single", limit=6)
    assert len(tasks) == 6
    for task in tasks:
        assert run_program(program(task, task["canonical_solution"]))[0], task["task_id"]
    assert not run_program(program(tasks[0], "    return None\n"))[0]


def test_multi_line_set_loads():
    tasks = load_tasks("multi", limit=3)
    assert len(tasks) == 3 and all(t["canonical_solution"].count("\n") >= 1 for t in tasks)


def test_sandbox_limits():
    assert run_program("while True:\n    pass\n", timeout=1.0) == (False, "timeout")
    passed, reason = run_program("import socket\nsocket.socket()\n")
    assert not passed and "blocked" in reason
    passed, reason = run_program("x = bytearray(4 << 30)\n", memory_mb=256)
    assert not passed and "MemoryError" in reason


def test_single_line_candidate_is_one_line():
    assert candidate({}, "    return x\n    more\n", "single") == "    return x\n"
    assert candidate({}, "    return x", "multi") == "    return x\n"
