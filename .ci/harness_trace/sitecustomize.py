# A wall-clock trace of the harness's own steps in every Python process of a run (the caller, the warm
# worker's judge, the subject processes), for finding where cudabench spends time outside sampling:
#   mkdir -p /tmp/tr && CB_TRACE=/tmp/tr PYTHONPATH=.ci/harness_trace cudabench run ...
#   cudabench workers --stop   # a warm worker writes its part when it ends
#   python3 .ci/harness_trace/report.py /tmp/tr
# CB_PROFILE=1 also writes DIR/prof-<pid>-<prog>.pstats (cProfile, main thread).
# Each process writes DIR/trace-<pid>.jsonl at exit: [pid, prog, name, t0, t1, note] (time.time()). The
# functions are wrapped as their modules load (TARGETS); nothing happens without CB_TRACE.
import os
if os.environ.get("CB_TRACE"):
    import importlib.abc, importlib.machinery, json, sys, time, functools, atexit
    TARGETS = {
        "cudabench.engine.lane": ["Lane.subject", "Lane.build", "Lane.ready"],
        "cudabench.engine.scheduler": ["Runner._attempt", "Runner._record", "Runner.run", "Runner.start",
                                       "Runner.close", "Runner._serve"],
        "cudabench.cli.run": ["execute"],
        "cudabench.cli.run_outputs": ["BackgroundSaver.close"],
        "cudabench.engine.worker": ["Handler._subject", "Handler._build", "Handler.handle"],
        "cudabench.measure.judge": ["Judge.run", "Judge.sync", "Session.run", "Session.timed", "Session.ask", "Session.release",
                                    "Session.write", "Session._same_inputs", "Session.finish_quietly",
                                    "Session.take", "Session.settle", "Session.judged_call",
                                    "release_cached", "open_shared", "Judge.draw", "Judge.reference"],
        "cudabench.measure.judged_calls": ["JudgedCalls.fresh_calls", "JudgedCalls._round",
                                           "JudgedCalls._other_kind", "JudgedCalls._checked_draw"],
        "cudabench.measure.integrity_pass": ["IntegrityPass.integrity", "IntegrityPass.shapes",
                                             "IntegrityPass.stream_order", "IntegrityPass._open_outputs",
                                             "IntegrityPass._mutated", "IntegrityPass._mutation_counts"],
        "cudabench.measure.transport": ["share_outputs", "open_shared"],
        "cudabench.engine.subject_worker": ["SubjectHandler.handle"],
        "cudabench.measure.blind": ["BlindRunner.open", "BlindRunner.hot", "BlindRunner.finish",
                                    "BlindRunner.call", "BlindRunner.peak", "BlindRunner.poison",
                                    "BlindRunner.round", "BlindRunner.samples", "BlindRunner.order",
                                    "BlindRunner._warm", "BlindRunner.sync"],
        "cudabench.results.exporters.json_document": ["result_to_dict"],
        # the parts of a judged call (session 25)
        "cudabench.measure.lanes": ["write_lane"],
        "cudabench.measure.poison": ["poison"],
        "cudabench.measure.timers": ["EventTimer.samples", "CuptiTimer.samples", "EventTimer.prepare"],
        "cudabench.engine.workers": ["ProcessWorker.wait", "ProcessWorker.send"],
        "cudabench.engine.channel": ["Channel.send"],
        "cudabench.measure.state": ["StateGuard.restore"],
        "cudabench.measure.memory": ["release_cached"],
        # inside the hot request and a subject's open and finish (session 27)
        "cudabench.measure.cupti_pass": ["cupti_pass"],
        "cudabench.measure.clocks": ["read_clocks", "ClockMonitor.__enter__", "ClockMonitor.__exit__",
                                     "ClockMonitor.applied"],
        "cudabench.measure.loop": ["measure", "Warmup.run"],
        "cudabench.measure.stream_order": ["order_probe"],
        "torch.cuda": ["ipc_collect", "empty_cache"],
        "cudabench.measure.check": ["compare", "relative_error"],
        # inside the CUPTI pass (session 29)
        "cudabench.measure.cupti_activity": ["recorded", "activity_per_call", "ranged_call"],
        "torch.autograd": ["_prepare_profiler", "_enable_profiler", "_disable_profiler"],
    }
    EVENTS = [[os.getpid(), os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "x", "process start",
               time.time(), time.time(), ""]]
    PROG = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "x"

    def wrap(fn, name):
        @functools.wraps(fn)
        def traced(*a, **k):
            t0 = time.time()
            note = ""
            if name.endswith(".ask") and len(a) > 1 and isinstance(a[1], dict):
                note = str(a[1].get("op", ""))
            if name.endswith(".handle") and len(a) > 1 and isinstance(a[1], dict):
                note = str(a[1].get("op", a[1].get("type", "")))
            try:
                return fn(*a, **k)
            finally:
                EVENTS.append([os.getpid(), PROG, name, t0, time.time(), note])
        return traced

    def patch(module):
        for path in TARGETS.get(module.__name__, []):
            parts = path.split(".")
            owner = module
            for p in parts[:-1]:
                owner = getattr(owner, p, None)
                if owner is None:
                    break
            if owner is None or not hasattr(owner, parts[-1]):
                continue
            attr = owner.__dict__.get(parts[-1]) if isinstance(owner, type) else getattr(owner, parts[-1])
            if isinstance(attr, staticmethod) or attr is None:
                continue
            setattr(owner, parts[-1], wrap(getattr(owner, parts[-1]) if not isinstance(owner, type) else attr, path))

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            if fullname not in TARGETS:
                return None
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is None or spec.loader is None:
                return spec
            loader = spec.loader
            orig = loader.exec_module
            def exec_module(module, _o=orig):
                _o(module)
                patch(module)
            loader.exec_module = exec_module
            return spec
    sys.meta_path.insert(0, Finder())
    import gc
    gc.collect = wrap(gc.collect, "gc.collect")

    PROFILE = None
    if os.environ.get("CB_PROFILE"):  # also a cProfile of each process's main thread, beside its trace
        import cProfile
        PROFILE = cProfile.Profile()
        PROFILE.enable()

    def dump():
        EVENTS.append([os.getpid(), PROG, "process end", time.time(), time.time(), ""])
        if PROFILE is not None:
            try:
                PROFILE.disable()
                PROFILE.dump_stats(os.path.join(os.environ["CB_TRACE"], f"prof-{os.getpid()}-{PROG}.pstats"))
            except Exception:
                pass
        try:
            with open(os.path.join(os.environ["CB_TRACE"], f"trace-{os.getpid()}.jsonl"), "w") as f:
                for e in EVENTS:
                    f.write(json.dumps(e) + "\n")
        except Exception:
            pass
    atexit.register(dump)
    _orig_exit = os._exit
    def _exit(code, _o=_orig_exit):
        dump(); _o(code)
    os._exit = _exit
    import signal
    def _term(signum, frame):
        dump(); _orig_exit(0)
    try:
        signal.signal(signal.SIGTERM, _term)
    except Exception:
        pass
