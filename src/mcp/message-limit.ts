/** Most bytes of one MCP message from a client, on every transport: an HTTP body past it gets 413, a stdio line past it a JSON-RPC error. */
export const maxMessageBytes = 4 * 2 ** 20;
