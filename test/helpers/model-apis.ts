import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

/**
 * One step of a scripted model: call tools (by their a2rl name, matched against what the agent
 * offers; any other name is sent as it is), answer with text, or never answer (the agent waits
 * until it is stopped). A function makes the step from the request (e.g. a job id it returned).
 */
export type ModelStep = { call: Array<{ tool: string; arguments?: Record<string, unknown> }> } | { text: string } | { hang: true };
export type ScriptStep = ModelStep | ((request: ModelRequest) => ModelStep);

/** `openai` is the Responses API (Codex), `chat` OpenAI's Chat Completions (OpenCode, Qwen Code, any OpenAI-compatible client). */
export type Provider = 'anthropic' | 'openai' | 'chat' | 'gemini';

export interface ModelRequest {
  provider: Provider;
  path: string;
  headers: IncomingMessage['headers'];
  body: any;
  /** The tool names the agent offered the model in this request. */
  tools: string[];
  /** The whole request as text: instructions, history and tool results, to search. */
  text: string;
  /** Whether this request was answered from the script (it offered tools) or with a filler. */
  scripted: boolean;
  /** The tokens the answer reported (undefined while unanswered), in the transcripts' common counts. */
  usage?: ReportedUsage;
}

/**
 * Tokens an answer reports, made from the request and the answer as a real API would count them (about 4 characters
 * a token): the whole prompt (`input`, of which half is read from the cache and, on Anthropic, an eighth written to
 * it) and everything generated (`output`, of which `reasoning` thinking, on OpenAI and Gemini).
 */
export interface ReportedUsage {
  input: number;
  cachedInput: number;
  cacheWrite: number;
  output: number;
  reasoning: number;
}

function reportedUsage(provider: Provider, raw: string, answer: unknown): ReportedUsage {
  const input = Math.ceil(raw.length / 4);
  const reasoning = provider === 'anthropic' ? 0 : 7;
  return {
    input,
    cachedInput: Math.floor(input / 2),
    cacheWrite: provider === 'anthropic' ? Math.floor(input / 8) : 0,
    output: Math.ceil(JSON.stringify(answer).length / 4) + reasoning,
    reasoning,
  };
}

/** What the agent sent back for each tool call the script made, by the call's id. */
export interface ToolResultSeen {
  tool: string;
  text: string;
}

const sse = (res: ServerResponse, events: Array<[string | null, unknown]>) => {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const [event, data] of events) res.write(`${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(data)}\n\n`);
  res.end();
};

/** Tool names in a request, per provider's format. */
function offeredTools(provider: Provider, body: any): string[] {
  if (provider === 'anthropic') return (body.tools ?? []).map((tool: { name: string }) => tool.name);
  if (provider === 'chat') return (body.tools ?? []).map((tool: { function?: { name: string } }) => tool.function?.name ?? '');
  // Codex groups an MCP server's tools in a namespace (`mcp__a2rl`): listed here as `mcp__a2rl__<tool>`.
  if (provider === 'openai') {
    return (body.tools ?? []).flatMap((tool: { name?: string; type: string; tools?: Array<{ name: string }> }) =>
      tool.type === 'namespace' ? (tool.tools ?? []).map((inner) => `${tool.name}__${inner.name}`) : [tool.name ?? tool.type],
    );
  }
  return (body.tools ?? []).flatMap((group: { functionDeclarations?: Array<{ name: string }> }) =>
    Object.keys(group).length && group.functionDeclarations ? group.functionDeclarations.map((f) => f.name) : Object.keys(group),
  );
}

/**
 * Real local HTTP servers speaking three model providers' streaming protocols (Anthropic
 * Messages, OpenAI Responses, Gemini streamGenerateContent), standing in for the paid model
 * behind a real agent CLI. Each request that offers tools gets the script's next step (tool
 * calls, or the final text); requests that offer none (titles, checks) get a short filler
 * text. Every request is kept, so a test can assert what the agent offered and sent.
 */
export async function startModelApi(script: ScriptStep[]) {
  const requests: ModelRequest[] = [];
  let step = 0;
  let callId = 0;
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => (raw += chunk));
    req.on('end', () => {
      const path = req.url ?? '';
      const provider: Provider | undefined = path.startsWith('/v1/messages')
        ? 'anthropic'
        : path.startsWith('/v1/responses')
          ? 'openai'
          : path.startsWith('/v1/chat/completions')
            ? 'chat'
            : path.includes(':streamGenerateContent') || path.includes(':generateContent')
              ? 'gemini'
              : undefined;
      if (!provider || req.method !== 'POST') {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `not scripted: ${req.method} ${path}` } }));
        return;
      }
      let body: any;
      try {
        body = JSON.parse(raw || '{}');
      } catch {
        body = {};
      }
      if (path.includes('count_tokens')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ input_tokens: 10 }));
        return;
      }
      const tools = offeredTools(provider, body);
      const scripted = tools.length > 0;
      const request: ModelRequest = { provider, path, headers: req.headers, body, tools, text: raw, scripted };
      requests.push(request);
      // After the script: 'Done.', or, when it ended hanging, more hanging (an agent may retry a request that timed out).
      const last = script.at(-1);
      const after = typeof last === 'object' && 'hang' in last ? last : { text: 'Done.' };
      const planned = scripted ? (script[step++] ?? after) : { text: fillerFor(provider, body) };
      const next = typeof planned === 'function' ? planned(request) : planned;
      if ('hang' in next) return;
      const calls =
        'call' in next
          ? next.call.map((call) => ({
              id: `call_${++callId}`,
              name: tools.find((name) => offeredAs(name, call.tool)) ?? call.tool,
              arguments: call.arguments ?? {},
            }))
          : [];
      const text = 'text' in next ? next.text : '';
      request.usage = reportedUsage(provider, raw, { calls, text });
      if (provider === 'anthropic') answerAnthropic(res, body, calls, text, request.usage);
      else if (provider === 'openai') answerOpenAi(res, body, calls, text, request.usage);
      else if (provider === 'chat') answerChat(res, body, calls, text, request.usage);
      else answerGemini(res, path, calls, text, request.usage);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    /** Scripted (tool-offering) requests only. */
    scripted: () => requests.filter((request) => request.scripted),
    /** How many of the script's steps were served. */
    stepsServed: () => Math.min(step, script.length),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * How each CLI names an MCP server's tool: Claude Code, Codex and Qwen Code `mcp__a2rl__exec`, Gemini CLI
 * `mcp_a2rl_exec`, OpenCode `a2rl_exec`.
 */
export function offeredAs(offered: string, tool: string): boolean {
  return [tool, `mcp__a2rl__${tool}`, `mcp_a2rl_${tool}`, `a2rl_${tool}`].includes(offered);
}

/** Gemini's side checks ask for JSON (the next speaker); other fillers are plain text. */
function fillerFor(provider: Provider, body: any): string {
  if (provider === 'gemini' && body.generationConfig?.responseMimeType === 'application/json') {
    return JSON.stringify({ reasoning: 'The task is done.', next_speaker: 'user' });
  }
  return 'ok';
}

type Call = { id: string; name: string; arguments: Record<string, unknown> };

/** Anthropic's usage: `input_tokens` are the prompt's tokens neither read from nor written to the cache. */
function anthropicUsage(usage: ReportedUsage, outputTokens: number) {
  return {
    input_tokens: usage.input - usage.cachedInput - usage.cacheWrite,
    cache_creation_input_tokens: usage.cacheWrite,
    cache_read_input_tokens: usage.cachedInput,
    output_tokens: outputTokens,
    service_tier: 'standard',
  };
}

function answerAnthropic(res: ServerResponse, body: any, calls: Call[], text: string, reported: ReportedUsage): void {
  // As the API streams it: the prompt's counts and one output token when the message starts, the final counts with its delta.
  const usage = anthropicUsage(reported, 1);
  const message = {
    id: `msg_${Date.now()}`,
    type: 'message',
    role: 'assistant',
    model: body.model ?? 'scripted',
    content: [],
    stop_reason: null,
    stop_sequence: null,
    usage,
  };
  const events: Array<[string, unknown]> = [['message_start', { type: 'message_start', message }]];
  const blocks: Array<[unknown, unknown]> = calls.length
    ? calls.map((call) => [
        { type: 'tool_use', id: call.id, name: call.name, input: {} },
        { type: 'input_json_delta', partial_json: JSON.stringify(call.arguments) },
      ])
    : [
        [
          { type: 'text', text: '' },
          { type: 'text_delta', text },
        ],
      ];
  blocks.forEach(([start, delta], index) => {
    events.push(['content_block_start', { type: 'content_block_start', index, content_block: start }]);
    events.push(['content_block_delta', { type: 'content_block_delta', index, delta }]);
    events.push(['content_block_stop', { type: 'content_block_stop', index }]);
  });
  events.push([
    'message_delta',
    {
      type: 'message_delta',
      delta: { stop_reason: calls.length ? 'tool_use' : 'end_turn', stop_sequence: null },
      usage: anthropicUsage(reported, reported.output),
    },
  ]);
  events.push(['message_stop', { type: 'message_stop' }]);
  if (body.stream === false) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        ...message,
        content: [{ type: 'text', text }],
        stop_reason: 'end_turn',
        usage: anthropicUsage(reported, reported.output),
      }),
    );
    return;
  }
  sse(res, events);
}

function answerOpenAi(res: ServerResponse, body: any, calls: Call[], text: string, reported: ReportedUsage): void {
  const id = `resp_${Date.now()}`;
  const namespaces: string[] = (body.tools ?? [])
    .filter((tool: { type: string }) => tool.type === 'namespace')
    .map((tool: { name: string }) => tool.name);
  const named = (name: string) => {
    const namespace = namespaces.find((ns) => name.startsWith(`${ns}__`));
    return namespace ? { namespace, name: name.slice(namespace.length + 2) } : { name };
  };
  const output = calls.length
    ? calls.map((call) => ({
        type: 'function_call',
        id: `fc_${call.id}`,
        call_id: call.id,
        ...named(call.name),
        arguments: JSON.stringify(call.arguments),
        status: 'completed',
      }))
    : [
        {
          type: 'message',
          id: `msg_${id}`,
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text, annotations: [] }],
        },
      ];
  // The Responses API's usage: input tokens include the cached ones, output tokens the reasoning ones.
  const usage = {
    input_tokens: reported.input,
    input_tokens_details: { cached_tokens: reported.cachedInput },
    output_tokens: reported.output,
    output_tokens_details: { reasoning_tokens: reported.reasoning },
    total_tokens: reported.input + reported.output,
  };
  const events: Array<[string, unknown]> = [
    ['response.created', { type: 'response.created', response: { id, status: 'in_progress', output: [] } }],
  ];
  output.forEach((item, output_index) => {
    events.push(['response.output_item.added', { type: 'response.output_item.added', output_index, item }]);
    if (item.type === 'message')
      events.push([
        'response.output_text.delta',
        { type: 'response.output_text.delta', output_index, item_id: item.id, content_index: 0, delta: text },
      ]);
    events.push(['response.output_item.done', { type: 'response.output_item.done', output_index, item }]);
  });
  events.push(['response.completed', { type: 'response.completed', response: { id, status: 'completed', output, usage } }]);
  sse(res, events);
}

function answerChat(res: ServerResponse, body: any, calls: Call[], text: string, reported: ReportedUsage): void {
  const id = `chatcmpl_${Date.now()}`;
  const base = { id, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model: body.model ?? 'scripted' };
  const toolCalls = calls.map((call, index) => ({
    index,
    id: call.id,
    type: 'function',
    function: { name: call.name, arguments: JSON.stringify(call.arguments) },
  }));
  // Chat Completions' usage: prompt tokens include the cached ones, completion tokens the reasoning ones.
  const usage = {
    prompt_tokens: reported.input,
    completion_tokens: reported.output,
    total_tokens: reported.input + reported.output,
    prompt_tokens_details: { cached_tokens: reported.cachedInput },
    completion_tokens_details: { reasoning_tokens: reported.reasoning },
  };
  const finish = calls.length ? 'tool_calls' : 'stop';
  if (body.stream !== true) {
    res.writeHead(200, { 'content-type': 'application/json' });
    const message = { role: 'assistant', content: calls.length ? null : text, ...(calls.length ? { tool_calls: toolCalls } : {}) };
    res.end(JSON.stringify({ ...base, object: 'chat.completion', choices: [{ index: 0, message, finish_reason: finish }], usage }));
    return;
  }
  const delta = calls.length ? { role: 'assistant', content: null, tool_calls: toolCalls } : { role: 'assistant', content: text };
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const chunk of [
    { ...base, choices: [{ index: 0, delta, finish_reason: null }] },
    { ...base, choices: [{ index: 0, delta: {}, finish_reason: finish }] },
    // Sent whether or not the client asked for it (stream_options.include_usage), as most compatible servers do.
    { ...base, choices: [], usage },
  ])
    res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  res.end('data: [DONE]\n\n');
}

function answerGemini(res: ServerResponse, path: string, calls: Call[], text: string, reported: ReportedUsage): void {
  const parts = calls.length ? calls.map((call) => ({ functionCall: { name: call.name, args: call.arguments } })) : [{ text }];
  const chunk = {
    candidates: [{ content: { role: 'model', parts }, finishReason: 'STOP', index: 0 }],
    // Gemini's usage: the prompt count includes the cached tokens; the candidates leave out the thoughts, the total has them.
    usageMetadata: {
      promptTokenCount: reported.input,
      cachedContentTokenCount: reported.cachedInput,
      candidatesTokenCount: reported.output - reported.reasoning,
      thoughtsTokenCount: reported.reasoning,
      totalTokenCount: reported.input + reported.output,
      promptTokensDetails: [{ modality: 'TEXT', tokenCount: reported.input }],
    },
    modelVersion: 'scripted',
  };
  if (path.includes(':streamGenerateContent')) sse(res, [[null, chunk]]);
  else {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(chunk));
  }
}

/** Each provider's error body for a status: what its API answers a refused key (401) or an overload (503). */
function errorBody(provider: Provider, status: 401 | 503): unknown {
  const message = status === 401 ? 'invalid x-api-key' : 'the model is overloaded';
  if (provider === 'anthropic')
    return { type: 'error', error: { type: status === 401 ? 'authentication_error' : 'overloaded_error', message } };
  if (provider === 'openai')
    return {
      error: { message, type: status === 401 ? 'invalid_request_error' : 'server_error', code: status === 401 ? 'invalid_api_key' : null },
    };
  return { error: { code: status, message, status: status === 401 ? 'UNAUTHENTICATED' : 'UNAVAILABLE' } };
}

/**
 * A model API that is down for the whole run: every request to any of the three providers'
 * endpoints gets `status` with that provider's error body. Counts the requests it refused.
 */
export async function startFailingModelApi(status: 401 | 503) {
  let refused = 0;
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const path = req.url ?? '';
      const provider: Provider = path.startsWith('/v1/messages')
        ? 'anthropic'
        : path.startsWith('/v1/responses') || path.startsWith('/v1/chat/completions')
          ? 'openai'
          : 'gemini';
      refused++;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(errorBody(provider, status)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    refused: () => refused,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Codex takes its model provider from its configuration: a provider on loopback, given on its command line. */
export const codexProvider = (url: string) => [
  '-c',
  `model_providers.scripted={name="scripted",base_url="${url}/v1",wire_api="responses",env_key="OPENAI_API_KEY",supports_websockets=false}`,
  '-c',
  'model_provider="scripted"',
];

/** Each provider's API on loopback: what the launcher's environment gives the agent to reach it. */
export const modelApiEnv = (url: string): Record<string, string> => ({
  ANTHROPIC_BASE_URL: url,
  ANTHROPIC_API_KEY: 'sk-scripted',
  OPENAI_API_KEY: 'sk-scripted',
  GOOGLE_GEMINI_BASE_URL: url,
  GEMINI_API_KEY: 'scripted',
  // OpenCode's provider (agents.ts) and Qwen Code read an OpenAI-compatible Chat Completions API from these.
  OPENAI_BASE_URL: `${url}/v1`,
});
