"""a2rl's job trace: what a job's Python actually ran, for the report's training route (src/jobs/job-trace.ts).

Python imports this module at start-up (the run's sandbox puts its folder on PYTHONPATH). In a training job (the job
manager sets JOB_TRACE_ID) it appends one JSON object a line to $JOB_TRACE_DIR/job-$JOB_TRACE_ID.jsonl, each fact once
per process:
- python: the process started (its command line);
- trainer: a trl or transformers trainer class (from the installed package, not the workspace) was built
  (`init`) or trained (`train`); an import alone writes nothing;
- gradient: the first autograd backward pass (torch.autograd.backward, which Tensor.backward calls);
- online: a sampled generation (microlm's decode.generate with temperature > 0, transformers' generate with
  do_sample, vLLM's LLM.generate at a temperature > 0) came between two backward passes: the job may have trained on
  samples it drew itself (the report asks its code for a reward too);
- read: a file under /workspace opened for reading (the task's library and Python sources excepted), at most 256 a
  process, and none once the trace file holds 64 KiB (a DataLoader's workers each read the data again), so the facts
  above stay within what the report reads;
- exit: how many backward passes ran.
It costs one string comparison per import and per audited event, and never fails the job: without the trace
folder it writes nothing. Its wrappers keep the wrapped functions' names and signatures (functools.wraps): libraries
inspect them.
"""

import functools
import json
import os
import sys

_WORKSPACE = "/workspace/"
_LIBRARY = "/workspace/lib/"
_MAX_READS = 256
_MAX_READ_BYTES = 64 * 1024
# vLLM is imported only by the job itself: its LLM class is instrumented when its module runs, never imported here.
_INSTRUMENTED = ("torch", "microlm.decode", "transformers.trainer", "transformers.generation.utils", "vllm.entrypoints.llm")
_TRL_TRAINERS = ("trl.trainer.", "trl.experimental.")


def _trace_file():
    folder, job = os.environ.get("JOB_TRACE_DIR"), os.environ.get("JOB_TRACE_ID")
    if not folder or not job or not job.isdigit():
        return None
    try:
        os.makedirs(folder, exist_ok=True)
        return os.open(f"{folder}/job-{job}.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError:
        return None


_fd = _trace_file()
_written = set()
_reads = set()
_state = {"gradients": 0, "sampled_after_gradient": False, "online": False}


def _write(fact, **data):
    if _fd is None:
        return
    try:
        line = json.dumps({"fact": fact, **data}, sort_keys=True)
        if line in _written:
            return
        _written.add(line)
        os.write(_fd, (line[:-1] + f', "pid": {os.getpid()}}}\n').encode())
    except (OSError, TypeError, ValueError):
        pass


def _installed(origin):
    """Whether a module comes from the Python installation, not from the agent's workspace."""
    path = os.path.realpath(origin or "")
    return not path.startswith(_WORKSPACE) and any(path.startswith(p) for p in {sys.prefix, sys.base_prefix, "/usr/"})


def _on_backward(backward):
    @functools.wraps(backward)
    def traced(*args, **kwargs):
        _state["gradients"] += 1
        if _state["sampled_after_gradient"] and not _state["online"]:
            _state["online"] = True
            _write("online")
        _write("gradient")
        return backward(*args, **kwargs)

    return traced


def _sampled(sampled):
    if sampled and _state["gradients"] > 0:
        _state["sampled_after_gradient"] = True


def _on_microlm_generate(generate):
    @functools.wraps(generate)
    def traced(model, prompts, max_new_tokens, temperature=0.0, *args, **kwargs):
        _sampled(bool(temperature) and temperature > 0)
        return generate(model, prompts, max_new_tokens, temperature, *args, **kwargs)

    return traced


def _on_hf_generate(generate):
    @functools.wraps(generate)
    def traced(self, *args, **kwargs):
        config = kwargs.get("generation_config") or getattr(self, "generation_config", None)
        _sampled(bool(kwargs.get("do_sample", getattr(config, "do_sample", False))))
        return generate(self, *args, **kwargs)

    return traced


def _vllm_sampled(params):
    """Whether vLLM samples with these SamplingParams (one, a list, or None: the defaults, temperature 1)."""
    if params is None:
        return True
    return any(getattr(p, "temperature", 1.0) > 0 for p in (params if isinstance(params, (list, tuple)) else [params]))


def _on_vllm_generate(generate):
    @functools.wraps(generate)
    def traced(self, *args, **kwargs):
        try:
            _sampled(_vllm_sampled(kwargs["sampling_params"] if "sampling_params" in kwargs else (args[1] if len(args) > 1 else None)))
        except Exception:
            pass
        return generate(self, *args, **kwargs)

    return traced


_trainers = set()


def _trainer_name(instance):
    return next((c.__name__ for c in type(instance).__mro__ if c in _trainers), type(instance).__name__)


def _on_trainer(cls):
    init, train = cls.__init__, getattr(cls, "train", None)

    @functools.wraps(init)
    def traced_init(self, *args, **kwargs):
        _write("trainer", name=_trainer_name(self), phase="init")
        return init(self, *args, **kwargs)

    def traced_train(self, *args, **kwargs):
        _write("trainer", name=_trainer_name(self), phase="train")
        return train(self, *args, **kwargs)

    cls.__init__ = traced_init
    if callable(train):
        cls.train = functools.wraps(train)(traced_train)
    _trainers.add(cls)


def _instrument(module):
    name = module.__name__
    if name == "torch":
        module.autograd.backward = _on_backward(module.autograd.backward)
    elif name == "microlm.decode":
        module.generate = _on_microlm_generate(module.generate)
    elif name == "transformers.generation.utils":
        module.GenerationMixin.generate = _on_hf_generate(module.GenerationMixin.generate)
    elif name == "vllm.entrypoints.llm":
        module.LLM.generate = _on_vllm_generate(module.LLM.generate)
    else:
        for value in list(vars(module).values()):
            if isinstance(value, type) and value.__module__ == name and value.__name__.endswith("Trainer"):
                _on_trainer(value)


class _AfterImport:
    """Finds nothing itself: for the few modules it instruments, wraps the real loader to instrument them once run."""

    def find_spec(self, name, path=None, target=None):
        if name not in _INSTRUMENTED and not name.startswith(_TRL_TRAINERS):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        # microlm is the task's own library (read-only under /workspace/lib); the others must be the installed ones.
        trusted = spec.origin and (spec.origin.startswith(_LIBRARY) if name.startswith("microlm") else _installed(spec.origin))
        if trusted and loader is not None and hasattr(loader, "exec_module"):
            run = loader.exec_module

            def exec_module(module):
                run(module)
                try:
                    _instrument(module)
                except Exception:
                    pass

            loader.exec_module = exec_module
        return spec


def _audit(event, args):
    if event != "open" or len(_reads) >= _MAX_READS:
        return
    # An exception raised here would fail the job's open().
    try:
        _audit_open(*args)
    except Exception:
        pass


def _audit_open(path, mode, flags):
    if isinstance(path, int):
        return
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if mode is not None and any(c in mode for c in "wax+"):
        return
    if mode is None and flags & (os.O_WRONLY | os.O_RDWR):
        return
    if not path.startswith("/"):
        try:
            path = os.path.join(os.getcwd(), path)
        except OSError:
            return
    path = os.path.normpath(path)
    if path.startswith(_WORKSPACE) and not path.startswith(_LIBRARY) and not path.endswith((".py", ".pyc")) and path not in _reads:
        _reads.add(path)
        # Shared by the job's processes: past this, reads would push later facts (a gradient, an exit) out of reach.
        if _fd is not None and os.fstat(_fd).st_size < _MAX_READ_BYTES:
            _write("read", path=path[len(_WORKSPACE) :])


def _at_exit():
    _write("exit", gradients=_state["gradients"])


if _fd is not None:
    import atexit

    _write("python", argv=[a[:200] for a in getattr(sys, "orig_argv", sys.argv)[:16]])
    sys.meta_path.insert(0, _AfterImport())
    sys.addaudithook(_audit)
    atexit.register(_at_exit)
