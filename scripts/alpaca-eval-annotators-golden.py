"""Writes test/fixtures/alpaca-eval-annotators-golden.json: what alpaca_eval 0.6.6's own code sends to and reads from
an LLM annotator, for the two annotators of src/grading/judge/alpaca-eval-annotators.ts. Not needed at test time;
rerun only to regenerate.

  python3 -m venv /tmp/aevenv && /tmp/aevenv/bin/pip install scipy pandas numpy pyyaml tqdm "setuptools<81"
  mkdir /tmp/ae066 && git -C <alpaca_eval clone> archive v0.6.6 src/alpaca_eval | tar -x -C /tmp/ae066
  mkdir /tmp/rdref && git -C <RD-Agent clone> archive 471eb30d rdagent/scenarios/rl/autorl_bench/benchmarks/alpacaeval | tar -x -C /tmp/rdref
  /tmp/aevenv/bin/python scripts/alpaca-eval-annotators-golden.py /tmp/ae066/src/alpaca_eval \\
      /tmp/rdref/rdagent/scenarios/rl/autorl_bench/benchmarks/alpacaeval > test/fixtures/alpaca-eval-annotators-golden.json

Three parts:
- "recorded": the reference harness's own recorded annotations (RD-Agent autorl_bench,
  annotators_gpt52_fn/annotations_seed0_configs.json: 100 AlpacaEval instructions annotated by gpt-5.2 through
  alpaca_eval 0.6.6): each instruction, the judge's raw answer (the make_partial_leaderboard arguments) and the
  preference alpaca_eval made of it. Only those three fields are kept: the outputs change neither which order
  alpaca_eval showed nor how it read the answer.
- "prompts": for each annotator, the chat messages alpaca_eval builds for a few instructions and outputs (placeholders,
  braces, quotes, non-ASCII, an output holding another placeholder), with its RandomSwitchTwoColumnsProcessor,
  make_prompts and prompt_to_chatml run unchanged, and the request fields its config names.
- "parsing": made-up answers (tool calls, fenced JSON, malformed ones; log-probabilities with one, both or neither
  identifier, two positions) read by alpaca_eval's fn_completion_parser with the config's kwargs, as its
  _parse_completions does (a raised error or other than one annotation gives None), then unswitched.

alpaca_eval's modules are loaded unchanged from that tree; only `datasets` and `huggingface_hub`, which they import
but these functions never use, are stubbed. The text a chat choice yields is what decoders/openai.py takes (content,
" " when empty, replaced by a function call's or the first tool call's arguments), restated in `choice_text` since
that module needs the openai client.
"""

import importlib
import json
import math
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import yaml


def load_alpaca_eval(root: Path):
    for name in ("datasets", "huggingface_hub"):
        stub = types.ModuleType(name)
        stub.hf_hub_download, stub.Dataset = None, type("Dataset", (), {})
        sys.modules[name] = stub
    package = types.ModuleType("alpaca_eval")
    package.__path__ = [str(root)]
    sys.modules["alpaca_eval"] = package
    return (importlib.import_module("alpaca_eval.utils"), importlib.import_module("alpaca_eval.completion_parsers"),
            importlib.import_module("alpaca_eval.processors"))


def choice_text(choice):
    message = choice["message"]
    text = " " if message.get("content") == "" else message.get("content")
    if message.get("function_call"):
        text = message["function_call"]["arguments"]
    if message.get("tool_calls"):
        text = message["tool_calls"][0]["function"]["arguments"]
    return text


def main():
    alpaca_eval_root, reference_root = Path(sys.argv[1]), Path(sys.argv[2])
    utils, parsers, processors = load_alpaca_eval(alpaca_eval_root)
    fn_config = yaml.safe_load((reference_root / "annotators_gpt52_fn" / "configs.yaml").read_text())["alpaca_eval_gpt5_2_fn"]
    weighted_config = yaml.safe_load((alpaca_eval_root / "evaluators_configs" / "weighted_alpaca_eval_gpt4_turbo" / "configs.yaml")
                                     .read_text())["weighted_alpaca_eval_gpt4_turbo"]
    annotators = {
        "alpaca_eval_gpt5_2_fn": (fn_config, (reference_root / "annotators_gpt52_fn" / "alpaca_eval_fn.txt").read_text(),
                                  "choice_text"),
        "weighted_alpaca_eval_gpt4_turbo": (weighted_config,
                                            (alpaca_eval_root / "evaluators_configs" / "alpaca_eval_clf_gpt4_turbo" / "alpaca_eval_clf.txt").read_text(),
                                            "choice"),
    }
    # PairwiseAnnotator's default: switch output_1 and output_2 per instruction and read back 3 - x, with the seed
    # BaseAnnotator hands its processors (seed=0, what alpaca_eval's evaluate uses).
    switcher = processors.RandomSwitchTwoColumnsProcessor(
        two_columns_to_switch=["output_1", "output_2"], random_seed_columns=["instruction"], _switch_column="is_switched_outputs", seed=0,
        fn_replace_if_switch=lambda df: df.assign(preference=df["preference"].apply(lambda x: 3 - x)) if "preference" in df else df,
    )

    def shown(instruction, reference, response):
        df = switcher.preprocess(pd.DataFrame([dict(instruction=instruction, output_1=reference, output_2=response)]))
        return df

    def parse(name, choice):
        config, _, completion = annotators[name]
        parser = getattr(parsers, config["fn_completion_parser"])
        try:
            annotations = list(parser(choice_text(choice) if completion == "choice_text" else choice, **config["completion_parser_kwargs"]))
            if len(annotations) != 1:
                return None
        except Exception:
            return None
        value = annotations[0]
        return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)

    def unswitched(df, preference):
        if preference is None:
            return None
        df = df.assign(preference=[preference])
        return float(switcher.postprocess(df)["preference"].iloc[0])

    recorded = json.loads((reference_root / "annotators_gpt52_fn" / "annotations_seed0_configs.json").read_text())
    out = {
        "made_with": "alpaca_eval v0.6.6 (f19c323d) and RD-Agent 471eb30d; scripts/alpaca-eval-annotators-golden.py",
        "recorded": [
            dict(instruction=r["instruction"], raw_completion=r["preference_raw_completion"], preference=r["preference"])
            for r in recorded
        ],
        "prompts": [],
        "parsing": [],
    }
    items = [
        ("What is 2+2?", "4", "The answer is 4."),
        ('Write {"json": true} with """quotes""" and {output_1} inside.', "Baseline {instruction} text", "Modèle: ünïcödé 🙂"),
        ("  Leading and trailing spaces  ", "\n\nreference with blank lines\n\n", ""),
        ("Écris un poème 🙂", "Un {output_2} poème", "A poem {instruction}"),
    ]
    for name, (config, template, _) in annotators.items():
        request = {k: v for k, v in config["completions_kwargs"].items() if k != "model_name"}
        for instruction, reference, response in items:
            df = shown(instruction, reference, response)
            prompts, _ = utils.make_prompts(df, template, batch_size=1)
            out["prompts"].append(dict(annotator=name, instruction=instruction, reference=reference, response=response,
                                       switched=bool(df["is_switched_outputs"].iloc[0]), messages=utils.prompt_to_chatml(prompts[0]),
                                       config_request=request))

    def tool_call(arguments):
        return {"message": {"role": "assistant", "content": None,
                            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "make_partial_leaderboard", "arguments": arguments}}]}}

    fn_choices = [
        tool_call('{"ordered_models":[{"model":"m","rank":1},{"model":"M","rank":2}]}'),
        tool_call('{"ordered_models":[{"model":"M","rank":1},{"model":"m","rank":2}]}'),
        tool_call('{"ordered_models":[{"model":"m","rank":1.0},{"model":"M","rank":2.0}]}'),
        tool_call('{"ordered_models":[{"model":"m","rank":3},{"model":"M","rank":1}]}'),
        tool_call('{"ordered_models":[]}'),
        tool_call('{"ordered_models":'),
        tool_call('[{"ordered_models":[{"model":"m","rank":2}]},{"ordered_models":[{"model":"m","rank":1}]}]'),
        {"message": {"role": "assistant", "content": 'Here: ```json\n{"ordered_models": [{"model": "m", "rank": 2}]}\n```'}},
        {"message": {"role": "assistant", "content": "m"}},
        {"message": {"role": "assistant", "content": ""}},
        {"message": {"role": "assistant", "content": None,
                     "function_call": {"name": "make_partial_leaderboard", "arguments": '{"ordered_models":[{"model":"m","rank":2}]}'}}},
    ]

    def logprobs(*positions):
        return {"message": {"role": "assistant", "content": "m"},
                "logprobs": {"content": [{"token": "m", "logprob": -0.1, "top_logprobs": [dict(token=t, logprob=lp) for t, lp in top]}
                                         for top in positions]}}

    weighted_choices = [
        logprobs([("m", -0.2), ("M", -1.8), ("The", -5.0)]),
        logprobs([("M", -0.01), ("m", -4.7)]),
        logprobs([("M", -0.3), ("Both", -2.0)]),
        logprobs([("m", -0.0)]),
        logprobs([("The", -0.1), ("A", -2.3)]),
        logprobs([("m", -0.5), ("M", -1.0)], [("m", -0.2)]),
        logprobs([("m", -3.0), ("m", -0.1), ("M", -1.0)]),
        {"message": {"role": "assistant", "content": "m"}},
    ]
    for name, choices in (("alpaca_eval_gpt5_2_fn", fn_choices), ("weighted_alpaca_eval_gpt4_turbo", weighted_choices)):
        for instruction in ("What is 2+2?", "Écris un poème 🙂"):
            df = shown(instruction, "reference", "response")
            for choice in choices:
                out["parsing"].append(dict(annotator=name, instruction=instruction, switched=bool(df["is_switched_outputs"].iloc[0]),
                                           choice=choice, preference=unswitched(df, parse(name, choice))))
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    np.seterr(divide="ignore")
    main()
