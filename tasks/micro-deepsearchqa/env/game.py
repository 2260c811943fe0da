"""The multi-hop search environment and its question types."""

import random
import re

from . import corpus

MAX_STEPS = 6
MAX_NEW_TOKENS = 16
MAX_OBS_CHARS = 200  # keeps prompt + action inside the model's 256-character context

# type -> (question template, subject kind, first relation, second relation)
QUESTION_TYPES = {
    "hq": ("Where is the employer of {} based?", "person", "works at", "based in"),
    "birth_region": ("Which region was {} born in?", "person", "born in", "part of"),
    "founder": ("Who founded the employer of {}?", "person", "works at", "founded by"),
    "mayor": ("Who is mayor of the city {} lives in?", "person", "lives in", "mayor"),
    "founder_birth": ("Where was the founder of {} born?", "company", "founded by", "born in"),
    "company_region": ("Which region is {} based in?", "company", "based in", "part of"),
}
TYPES = tuple(QUESTION_TYPES)

_ACTION = re.compile(r"^(search|answer)\[(.*)\]$")
_LINK = re.compile(r"^#\s*(\d+)$")


def answer_of(task_type, subject):
    _, _, first, second = QUESTION_TYPES[task_type]
    return corpus.FACTS[corpus.FACTS[subject][first]][second]


def normalize(text):
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def format_prompt(observation):
    """The policy's prompt for an observation: the observation, a newline and "> "."""
    return f"{observation}\n> "


class DeepSearchEnv:
    """reset(seed, options) -> (obs, info); step(action) -> (obs, reward, done, info). See the package docstring."""

    def reset(self, seed, options=None):
        options = options or {}
        rng = random.Random(seed)
        task_type = options.get("type") or rng.choice(TYPES)
        template, kind, _, _ = QUESTION_TYPES[task_type]
        subject = options.get("subject") or rng.choice(corpus.PEOPLE if kind == "person" else corpus.COMPANIES)
        self.task_type, self.subject = task_type, subject
        self.question = "Q: " + template.format(subject)
        self.answer = answer_of(task_type, subject)
        self.steps, self.done = 0, False
        self._results(corpus.search(template.format(subject)))
        return self.obs, self._info()

    def _info(self, **extra):
        admissible = [f"{verb}[#{k}]" for k in range(1, len(self.links) + 1) for verb in ("search", "answer")]
        return {"task_type": self.task_type, "admissible": admissible, **extra}

    def _render(self, prefix, titles):
        body, links = [], []
        for title in titles:
            parts = []
            for rel in corpus.ORDER[title]:
                target = corpus.FACTS[title][rel]
                links.append(target)
                parts.append(f"{rel} [{len(links)}] {target}")
            line = f"{prefix}{title}: " + "; ".join(parts)
            if body and len("\n".join(body + [line, self.question])) > MAX_OBS_CHARS:
                links = links[: len(links) - len(parts)]
                break
            body.append(line)
        return self._compose(body), links

    def _compose(self, body):
        """The observation: body lines (as many as fit), then the question line last."""
        while len(body) > 1 and len("\n".join(body + [self.question])) > MAX_OBS_CHARS:
            body = body[:-1]
        return "\n".join(body + [self.question])

    def _results(self, titles):
        if titles:
            self.obs, self.links = self._render("R: ", titles)
        else:
            self.obs, self.links = self._compose(["No results."]), []

    def step(self, action):
        if self.done:
            return self.obs, 0.0, True, self._info(success=False)
        self.steps += 1
        m = _ACTION.match(action.strip())
        link = None
        if m:
            inner = m.group(2).strip()
            lm = _LINK.match(inner)
            if lm:
                k = int(lm.group(1))
                link = self.links[k - 1] if 1 <= k <= len(self.links) else None
                if link is None:
                    m = None
        if not m:
            body = [line for line in self.obs.split("\n")[:-1] if line != "Nothing happens."]
            self.obs = self._compose(["Nothing happens."] + body)
        elif m.group(1) == "answer":
            given = link if link is not None else inner
            success = normalize(given) == normalize(self.answer)
            self.done = True
            self.obs = self._compose([f"Answered {given[:40]}: {'correct' if success else 'wrong'}."])
            return self.obs, float(success), True, self._info(success=success)
        elif link is not None:
            self.obs, self.links = self._render("D: ", [link])
        else:
            self._results(corpus.search(inner))
        if self.steps >= MAX_STEPS:
            self.done = True
            return self.obs, 0.0, True, self._info(success=False)
        return self.obs, 0.0, False, self._info()


def make_env():
    return DeepSearchEnv()

