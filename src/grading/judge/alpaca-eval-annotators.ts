import { PythonRandom } from './python-random.js';

/**
 * AlpacaEval's LLM annotators, as alpaca_eval 0.6.6 runs them (`annotators/pairwise_evaluator.py`, `utils.make_prompts`,
 * `utils.prompt_to_chatml`, `decoders/openai.py`, `completion_parsers.py`), for the full tier's `alpacaeval` (issue 35).
 * Each compares the reference output (alpaca_eval's output_1, the baseline) with the model's (output_2) for one
 * instruction and gives alpaca_eval's preference: 1 the reference is better, 2 the model's, fractions between
 * (weighted), null when the judge's answer cannot be parsed (alpaca_eval then leaves the instruction out).
 *
 * - `alpaca_eval_gpt5_2_fn`: the reference harness's annotator (RD-Agent autorl_bench
 *   `benchmarks/alpacaeval/annotators_gpt52_fn`): its ranking prompt, answered through a forced `make_partial_leaderboard`
 *   function call at temperature 0, read by `json_parser` (key `ordered_models`) then `ranking_parser` (model `m`).
 *   The reference's config asks for max_tokens 100, which reasoning models (its gpt-5.2) refuse; no token limit is sent.
 * - `weighted_alpaca_eval_gpt4_turbo`: AlpacaEval 2.0's own (`alpaca_eval_clf.txt`): one token, temperature 1, the top 5
 *   log-probabilities, read by `logprob_parser` (numerator `m`, denominators `m`, `M`, not binarised): the preference is
 *   2 − P(m) / (P(m) + P(M)). One token is asked as max_completion_tokens, the parameter current models accept.
 *
 * As in alpaca_eval, which output is shown first is decided per instruction by `RandomSwitchTwoColumnsProcessor`:
 * `random.Random("is_switched_outputs" + instruction + "0").choices([False, True])` (the seed an annotator passes its
 * processors: `BaseAnnotator(seed=0)`, not the processor's own default 123), and a switched answer is read
 * back as 3 − preference.
 */
export const alpacaEvalAnnotatorNames = ['alpaca_eval_gpt5_2_fn', 'weighted_alpaca_eval_gpt4_turbo'] as const;
export type AlpacaEvalAnnotatorName = (typeof alpacaEvalAnnotatorNames)[number];

/** One chat completion choice as the API returns it (the fields the parsers read). */
export interface ChatChoice {
  message?: {
    content?: string | null;
    function_call?: { arguments?: string } | null;
    tool_calls?: Array<{ function?: { arguments?: string } }> | null;
  };
  logprobs?: { content?: Array<{ top_logprobs?: Array<{ token: string; logprob: number }> }> | null } | null;
}

export interface AlpacaEvalAnnotator {
  readonly name: AlpacaEvalAnnotatorName;
  /** alpaca_eval's prompt template, with {instruction}, {output_1} and {output_2}. */
  readonly template: string;
  /** The request's fields besides model and messages. */
  readonly request: Readonly<Record<string, unknown>>;
  /** The preference in the order shown (1 output_1 better, 2 output_2), or null where alpaca_eval's parser gives none. */
  parse(choice: ChatChoice): number | null;
}

const rankingTemplate = `<|im_start|>system
You are a highly efficient assistant, who evaluates and rank large language models (LLMs) based on the quality of their responses to given prompts. This process will create a leaderboard reflecting the most accurate and human-preferred answers.
<|im_end|>
<|im_start|>user
I require a leaderboard for various large language models. I'll provide you with prompts given to these models and their corresponding responses. Your task is to assess these responses, ranking the models in order of preference from a human perspective. Once ranked, please output the results in a structured JSON format for the make_partial_leaderboard function.

## Prompt

{
    "instruction": """{instruction}""",
}

## Model Outputs

Here are the unordered outputs from the models. Each output is associated with a specific model, identified by a unique model identifier.

{
    {
        "model": "m",
        "output": """{output_1}"""
    },
    {
        "model": "M",
        "output": """{output_2}"""
    }
}

## Task

Evaluate and rank the models based on the quality and relevance of their outputs. The ranking should be such that the model with the highest quality output is ranked first.
<|im_end|>`;

const classifierTemplate = `<|im_start|>system
You are a highly efficient assistant, who evaluates and selects the best large language model (LLMs) based on the quality of their responses to a given instruction. This process will be used to create a leaderboard reflecting the most accurate and human-preferred answers.
<|im_end|>
<|im_start|>user
I require a leaderboard for various large language models. I'll provide you with prompts given to these models and their corresponding outputs. Your task is to assess these responses, and select the model that produces the best output from a human perspective.

## Instruction

{
    "instruction": """{instruction}""",
}

## Model Outputs

Here are the unordered outputs from the models. Each output is associated with a specific model, identified by a unique model identifier.

{
    {
        "model_identifier": "m",
        "output": """{output_1}"""
    },
    {
        "model_identifier": "M",
        "output": """{output_2}"""
    }
}

## Task

Evaluate the models based on the quality and relevance of their outputs, and select the model that generated the best output. Answer by providing the model identifier of the best model. We will use your output as the name of the best model, so make sure your output only contains one of the following model identifiers and nothing else (no quotes, no spaces, no new lines, ...): m or M.

## Best Model Identifier
<|im_end|>`;

const leaderboardFunction = {
  type: 'function',
  function: {
    name: 'make_partial_leaderboard',
    description: 'Make a leaderboard of models given a list of the models ordered by the preference of their outputs.',
    strict: true,
    parameters: {
      type: 'object',
      properties: {
        ordered_models: {
          type: 'array',
          description: 'A list of models ordered by the preference of their outputs. The first model in the list has the best output.',
          items: {
            type: 'object',
            properties: {
              model: { type: 'string', description: 'The name of the model' },
              rank: { type: 'number', description: 'Order of preference of the model, 1 has the best output' },
            },
            additionalProperties: false,
            required: ['model', 'rank'],
          },
        },
      },
      additionalProperties: false,
      required: ['ordered_models'],
    },
  },
};

/** The text alpaca_eval's OpenAI decoder reads from a choice: the content (" " for an empty one), else the function call's arguments. */
function completionText(choice: ChatChoice): string {
  const message = choice.message ?? {};
  let text = message.content === '' ? ' ' : (message.content ?? '');
  if (message.function_call?.arguments !== undefined) text = message.function_call.arguments;
  if (message.tool_calls?.length && message.tool_calls[0]!.function?.arguments !== undefined)
    text = message.tool_calls[0]!.function.arguments;
  return text;
}

/**
 * `pipeline_meta_parser` with `json_parser(annotation_key="ordered_models")` then `ranking_parser(model_1_name="m")`:
 * the rank (1 or 2) of model "m"; null where alpaca_eval's parsing raises or gives NaN, or gives other than one
 * annotation (its batch size is 1). Deviation: alpaca_eval also reads a rank list given as a Python-literal string
 * (ast.literal_eval); here only as a JSON string.
 */
export function parseLeaderboardRanking(text: string): number | null {
  if (text === '') return null;
  const fenced = text.includes('```json') ? /```json([\s\S]*?)```/.exec(text)?.[1] : text;
  let loaded: unknown;
  try {
    loaded = JSON.parse(fenced ?? '');
  } catch {
    return null;
  }
  const entries = Array.isArray(loaded) ? loaded : [loaded];
  if (entries.length !== 1) return null;
  const entry = entries[0] as Record<string, unknown> | null;
  if (entry === null || typeof entry !== 'object' || !('ordered_models' in entry)) return null;
  let ordered = entry.ordered_models;
  if (ordered === '') return null;
  if (typeof ordered === 'string') {
    try {
      ordered = JSON.parse(ordered);
    } catch {
      return null;
    }
  }
  if (!Array.isArray(ordered)) return null;
  const first = ordered.find((model) => model !== null && typeof model === 'object' && (model as { model?: unknown }).model === 'm') as
    { rank?: unknown } | undefined;
  // Python's `rank in [1, 2]`: 1.0 and True pass as 1.
  if (first?.rank === 1 || first?.rank === true) return 1;
  if (first?.rank === 2) return 2;
  return null;
}

/** scipy.special.logsumexp of finite or -Infinity values: max + log(Σ exp(x − max)). */
function logSumExp(values: number[]): number {
  const max = Math.max(...values);
  if (max === -Infinity) return -Infinity;
  return max + Math.log(values.reduce((sum, value) => sum + Math.exp(value - max), 0));
}

/**
 * `logprob_parser(numerator_token="m", denominator_tokens=["m", "M"], is_binarize=False)` on one choice: for each
 * generated position, 2 − P(m) / (P(m) + P(M)) from its top log-probabilities (a token missing from them counts as
 * probability 0; neither there: NaN). null where alpaca_eval gives NaN, raises (no log-probabilities), or gives other
 * than one annotation (more than one position).
 */
export function parseLogprobPreference(choice: ChatChoice): number | null {
  const positions = choice.logprobs?.content;
  if (!Array.isArray(positions) || positions.length !== 1 || !Array.isArray(positions[0]!.top_logprobs)) return null;
  const byToken = new Map<string, number>();
  for (const top of positions[0]!.top_logprobs) if (top.token === 'm' || top.token === 'M') byToken.set(top.token, top.logprob);
  if (byToken.size === 0) return null;
  const numerator = byToken.get('m') ?? -Infinity;
  const denominator = logSumExp([byToken.get('m') ?? -Infinity, byToken.get('M') ?? -Infinity]);
  return 2 - Math.exp(numerator - denominator);
}

export const alpacaEvalAnnotators: Readonly<Record<AlpacaEvalAnnotatorName, AlpacaEvalAnnotator>> = {
  alpaca_eval_gpt5_2_fn: {
    name: 'alpaca_eval_gpt5_2_fn',
    template: rankingTemplate,
    request: {
      temperature: 0,
      tools: [leaderboardFunction],
      tool_choice: { type: 'function', function: { name: 'make_partial_leaderboard' } },
    },
    parse: (choice) => parseLeaderboardRanking(completionText(choice)),
  },
  weighted_alpaca_eval_gpt4_turbo: {
    name: 'weighted_alpaca_eval_gpt4_turbo',
    template: classifierTemplate,
    request: { temperature: 1, max_completion_tokens: 1, logprobs: true, top_logprobs: 5 },
    parse: parseLogprobPreference,
  },
};

/** alpaca_eval's `make_prompts`: each placeholder's first occurrence replaced in turn ({instruction}, then the outputs). */
export function alpacaEvalPrompt(template: string, fields: { instruction: string; output_1: string; output_2: string }): string {
  let prompt = template;
  for (const key of ['instruction', 'output_1', 'output_2'] as const) prompt = prompt.replace(`{${key}}`, () => fields[key]);
  return prompt;
}

/** alpaca_eval's `prompt_to_chatml`: <|im_start|>role\ncontent<|im_end|> blocks as chat messages, each content stripped. */
export function promptToChatMessages(prompt: string): Array<{ role: string; content: string }> {
  return prompt
    .trim()
    .split('<|im_start|>')
    .slice(1)
    .map((block) => {
      const newline = block.indexOf('\n');
      return {
        role: block.slice(0, newline).trim(),
        content: block
          .slice(newline + 1)
          .split('<|im_end|>')[0]!
          .trim(),
      };
    });
}

/** Whether alpaca_eval shows this instruction's outputs switched (the model's first): its RandomSwitchTwoColumnsProcessor, with the annotator's seed 0. */
export function isSwitched(instruction: string): boolean {
  return new PythonRandom(`is_switched_outputs${instruction}0`).choice([false, true]);
}

/** The chat messages an annotator sends for one instruction, and how to read its answer back as a preference for the reference (1) or the model (2). */
export function annotationRequest(
  annotator: AlpacaEvalAnnotator,
  item: { instruction: string; reference: string; response: string },
): { messages: Array<{ role: string; content: string }>; read: (choice: ChatChoice) => number | null } {
  const switched = isSwitched(item.instruction);
  const [output_1, output_2] = switched ? [item.response, item.reference] : [item.reference, item.response];
  const messages = promptToChatMessages(alpacaEvalPrompt(annotator.template, { instruction: item.instruction, output_1, output_2 }));
  return {
    messages,
    read: (choice) => {
      const preference = annotator.parse(choice);
      return preference === null || !switched ? preference : 3 - preference;
    },
  };
}
