"""alpaca_eval's df_gamed.csv for a fixture hub: two length-gamed baselines' annotations over every instruction.

    fixture_length_control.write(hub_dir, n_instructions)

The real file's columns (model, index, preference, std_delta_len, instruction_difficulty, not_gamed_baseline),
one row per (gamed model, instruction), the instruction's difficulty repeated in both models' rows. The values
are made up but deterministic; fixture_hub.write writes it.
"""

import csv
import os

PATH = "datasets/tatsu-lab/alpaca_eval/df_gamed.csv"
COLUMNS = ("model", "index", "preference", "std_delta_len", "instruction_difficulty", "not_gamed_baseline")


def difficulty(i):
    """The fixture's difficulty of instruction i."""
    return round(((i * 37) % 11 - 5) / 4, 6)


def rows(n_instructions):
    out = []
    for model, sign in (("gpt4_gamed_verbose", -1), ("gpt4_gamed_concise", 1)):
        for i in range(n_instructions):
            delta = sign * (0.5 + (i % 4) / 2)  # the baseline minus the gamed model's length, standardised
            out.append({"model": model, "index": i, "preference": round(0.5 - 0.08 * delta - 0.05 * difficulty(i), 6),
                        "std_delta_len": delta, "instruction_difficulty": difficulty(i), "not_gamed_baseline": False})
    return out


def write(hub_dir, n_instructions):
    path = os.path.join(hub_dir, PATH)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows(n_instructions))
    return path
