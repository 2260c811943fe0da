"""Writes test/fixtures/alpaca-eval-lc-golden.json: synthetic inputs and what alpaca_eval 0.6.6's own
get_length_controlled_winrate returns for them. Not needed at test time; rerun only to regenerate.

  python3 -m venv /tmp/lcvenv && /tmp/lcvenv/bin/pip install pandas==2.3.3 scipy scikit-learn==1.9.1 numpy patsy
  mkdir /tmp/alpaca_eval-0.6.6 && git -C <alpaca_eval clone> archive v0.6.6 src/alpaca_eval/metrics | tar -x -C /tmp/alpaca_eval-0.6.6
  /tmp/lcvenv/bin/python scripts/alpaca-eval-lc-golden.py /tmp/alpaca_eval-0.6.6/src/alpaca_eval > test/fixtures/alpaca-eval-lc-golden.json

alpaca_eval's metrics modules are loaded unchanged from that tree. Only what they import from outside
the metrics folder is stubbed: huggingface_hub.hf_hub_download returns a synthetic df_gamed.csv written
here (instead of downloading the dataset's), and alpaca_eval.utils gets its two tiny helpers
(convert_to_dataframe for a list of dicts, validate_alpacaeval_preference) without the package's heavy imports.
"""

import importlib
import json
import math
import sys
import tempfile
import types
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import sklearn

warnings.filterwarnings("ignore")  # sklearn 1.9 deprecation notices about penalty="l1"


def install_stubs(alpaca_eval_dir: Path, df_gamed_path: Path) -> None:
    package = types.ModuleType("alpaca_eval")
    package.__path__ = []
    constants = types.ModuleType("alpaca_eval.constants")
    constants.DATASETS_TOKEN, constants.DATASETS_FORCE_DOWNLOAD, constants.DEFAULT_CACHE_DIR = None, False, None
    alpaca_types = types.ModuleType("alpaca_eval.types")
    alpaca_types.AnyLoadableDF = object
    utils = types.ModuleType("alpaca_eval.utils")
    utils.convert_to_dataframe = lambda data: data.copy() if isinstance(data, pd.DataFrame) else pd.DataFrame.from_records(data)
    utils.validate_alpacaeval_preference = lambda x, is_allow_nan=True: (1 <= x <= 2) or (is_allow_nan and np.isnan(x))
    metrics = types.ModuleType("alpaca_eval.metrics")
    metrics.__path__ = [str(alpaca_eval_dir / "metrics")]
    hub = types.ModuleType("huggingface_hub")

    def hf_hub_download(repo_id, filename, **kwargs):
        assert filename == "df_gamed.csv", filename
        return str(df_gamed_path)

    hub.hf_hub_download = hf_hub_download
    package.constants, package.types, package.utils, package.metrics = constants, alpaca_types, utils, metrics
    for name, module in {
        "alpaca_eval": package,
        "alpaca_eval.constants": constants,
        "alpaca_eval.types": alpaca_types,
        "alpaca_eval.utils": utils,
        "alpaca_eval.metrics": metrics,
        "huggingface_hub": hub,
    }.items():
        sys.modules[name] = module


def synthetic_case(rng, n_records, n_instructions, null_preference_at=(), equal_length_at=()):
    """Model-vs-baseline annotations plus a df_gamed with two gamed baselines over n_instructions."""
    difficulty = rng.normal(0, 1, n_instructions)
    gamed_rows = []
    for gamed_model, verbosity in [("gamed_verbose", 0.5), ("gamed_concise", -0.5)]:
        baseline_len = rng.integers(200, 3000, n_instructions)
        gamed_len = (baseline_len * rng.lognormal(verbosity, 0.4, n_instructions)).astype(int)
        delta = baseline_len - gamed_len
        std_delta = delta / delta.std(ddof=1)
        win = 1 / (1 + np.exp(np.tanh(std_delta) * 1.2 + 0.7 * difficulty))
        gamed_rows += [
            dict(model=gamed_model, index=i, preference=float(win[i]), std_delta_len=float(std_delta[i]),
                 instruction_difficulty=float(difficulty[i]), not_gamed_baseline=False)
            for i in range(n_instructions)
        ]
    baseline_len = rng.integers(100, 2500, n_records)
    model_len = (baseline_len * rng.lognormal(0.3, 0.5, n_records)).astype(int)
    for i in equal_length_at:
        model_len[i] = baseline_len[i]
    annotations = []
    for i in range(n_records):
        win = 1 / (1 + np.exp(-(0.8 * np.tanh((model_len[i] - baseline_len[i]) / 800) - 0.6 * difficulty[i] + 0.2)))
        draw = rng.random()
        if draw < 0.1:
            preference = 1.5
        elif draw < 0.15:
            preference = 0.0  # alpaca_eval's other spelling of a tie
        elif draw < 0.45:
            preference = float(min(2.0, max(1.0, 1 + win + rng.normal(0, 0.05))))  # weighted annotator
        else:
            preference = 2.0 if rng.random() < win else 1.0
        if i in null_preference_at:
            preference = float("nan")
        annotations.append(dict(output_1="b" * int(baseline_len[i]), output_2="m" * int(model_len[i]),
                                preference=preference, generator_1="baseline", generator_2="model"))
    return pd.DataFrame(gamed_rows), annotations, difficulty


def main() -> None:
    alpaca_eval_dir = Path(sys.argv[1])
    workdir = Path(tempfile.mkdtemp())
    df_gamed_path = workdir / "df_gamed.csv"
    install_stubs(alpaca_eval_dir, df_gamed_path)
    glm_winrate = importlib.import_module("alpaca_eval.metrics.glm_winrate")

    fitted = {}
    fit = glm_winrate.fit_LogisticRegressionCV

    def recording_fit(*args, **kwargs):
        fitted["model"] = fit(*args, **kwargs)
        return fitted["model"]

    glm_winrate.fit_LogisticRegressionCV = recording_fit

    rng = np.random.default_rng(17)
    specs = [
        dict(name="v1-120-records", glm="length_controlled_v1", n_records=120, n_instructions=120),
        # Its own stream: a case where liblinear's per-C seeds decide which C cross-validation picks.
        dict(name="v1-20-records-seed-sensitive", glm="length_controlled_v1", n_records=20, n_instructions=30, seed=5),
        dict(name="v1-48-records-two-unannotated", glm="length_controlled_v1", n_records=48, n_instructions=64,
             null_preference_at=(5, 31), equal_length_at=(7, 20)),
        dict(name="noreg-90-records", glm="length_controlled_noreg", n_records=90, n_instructions=90),
        dict(name="minimal-72-records-no-difficulty", glm="length_controlled_minimal", n_records=72, n_instructions=72),
    ]
    cases = []
    for spec in specs:
        gamed, annotations, difficulty = synthetic_case(
            np.random.default_rng(spec["seed"]) if "seed" in spec else rng, spec["n_records"], spec["n_instructions"],
            spec.get("null_preference_at", ()), spec.get("equal_length_at", ()))
        gamed.to_csv(df_gamed_path, index=False)
        metrics = glm_winrate.get_length_controlled_winrate(annotations, glm_name=spec["glm"], save_weights_dir=None)
        uses_difficulty = spec["glm"] != "length_controlled_minimal"
        records = []
        for i, a in enumerate(annotations):
            record = dict(preference=None if math.isnan(a["preference"]) else a["preference"],
                          modelOutputLength=len(a["output_2"]), baselineOutputLength=len(a["output_1"]))
            if uses_difficulty:
                record["instructionDifficulty"] = float(difficulty[i])  # alpaca_eval looks it up by position
            records.append(record)
        case = dict(name=spec["name"], glm=spec["glm"], records=records)
        if spec["glm"] == "length_controlled_v1":
            # The values as alpaca_eval reads them: pandas' default CSV float parser is not round-trip
            # exact, and liblinear's stopping tests can turn a one-ulp difference into 1e-4 in the result.
            case["gamedBaselineRows"] = [
                dict(preference=r.preference, standardisedLengthDelta=r.std_delta_len,
                     instructionDifficulty=r.instruction_difficulty)
                for r in pd.read_csv(df_gamed_path).itertuples()
            ]
        model = fitted["model"]
        case["expected"] = dict(
            winRate=float(metrics["win_rate"]),
            lengthControlledWinRate=float(metrics["length_controlled_winrate"]),
            lengthControlledStandardError=float(metrics["lc_standard_error"]),
            regularisationC=float(model.C_[0]),
            coefficients=[float(c) for c in model.coef_[0]],
        )
        cases.append(case)

    write_one_row_per_line(dict(
        note=("Synthetic inputs (numpy default_rng) and what alpaca_eval's own get_length_controlled_winrate "
              "returned for them, to full precision; regenerate with the script named in producedBy."),
        producedBy="scripts/alpaca-eval-lc-golden.py",
        alpacaEval="0.6.6 (tag v0.6.6), src/alpaca_eval/metrics/glm_winrate.py",
        versions=dict(numpy=np.__version__, pandas=pd.__version__, scikitLearn=sklearn.__version__),
        cases=cases,
    ))


def write_one_row_per_line(fixture: dict) -> None:
    """JSON with each record and gamed row on a line of its own, for readable diffs."""
    lines = ["{"]
    for key, value in fixture.items():
        if key != "cases":
            lines.append(f"  {json.dumps(key)}: {json.dumps(value)},")
    lines.append('  "cases": [')
    for i, case in enumerate(fixture["cases"]):
        lines.append("    {")
        fields = list(case.items())
        for j, (key, value) in enumerate(fields):
            comma = "," if j < len(fields) - 1 else ""
            if isinstance(value, list):
                rows = ",\n".join(f"        {json.dumps(row)}" for row in value)
                lines.append(f"      {json.dumps(key)}: [\n{rows}\n      ]{comma}")
            else:
                lines.append(f"      {json.dumps(key)}: {json.dumps(value)}{comma}")
        lines.append("    }" + ("," if i < len(fixture["cases"]) - 1 else ""))
    lines.append("  ]")
    lines.append("}")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
