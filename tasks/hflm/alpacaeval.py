"""AlpacaEval 2.0's generation as the reference runs it (RD-Agent autorl_bench): the instruction alone as the one
user turn, the model's chat template applied, greedy, at most 512 new tokens, the output stripped.

    from hflm import alpacaeval
    outputs = alpacaeval.respond(model_dir, [row["instruction"] for row in rows])

The outputs are then judged against alpaca_eval_gpt4_baseline's (the reference) by an LLM, and the score is
the length-controlled win rate; the server does that part (its judge grader kind), not this module.
"""

from .inference import GenerationParams, generate

GENERATION = GenerationParams(max_new_tokens=512, temperature=0.0, top_p=1.0, chat_template=True)


def messages(instruction):
    """The chat the reference sends for one instruction: the instruction as the only user turn, no system prompt."""
    return [{"role": "user", "content": instruction}]


def respond(model_dir, instructions, backend=None):
    """The model's stripped outputs to the instructions, in order, with the grader's prompt and generation."""
    texts = generate(model_dir, [messages(i) for i in instructions], GENERATION, backend=backend)
    return [text.strip() for text in texts]
