/** What an agent's transcript says of its model: whether a turn completed, and the last error a model call ended with. */
export interface ModelActivity {
  answered: boolean;
  lastError: string | undefined;
}
