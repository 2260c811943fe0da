import { createRequire } from 'node:module';
import type Docker from 'dockerode';

/**
 * A Docker engine client. dockerode is loaded the first time one is made: with its gRPC and SSH stacks it was a third
 * of every `a2rl` command's start (a stdio server's too), and most commands never talk to an engine.
 */
export function dockerClient(options?: Docker.DockerOptions): Docker {
  const Dockerode = createRequire(import.meta.url)('dockerode') as typeof Docker;
  return new Dockerode(options);
}

/** How long a server's start or a command waits for the Docker engine to answer before it says which engine did not. */
export const engineAnswerSeconds = 10;

/**
 * Pings the engine `docker` talks to: undefined once it answered, else what did not answer, where, and why, as a clause
 * (`no Docker engine answered at <DOCKER_HOST> within <seconds> s (<why>)`) the caller ends with what to do. Bounded, so
 * a socket nobody serves never holds a server's start or a command for ever. dockerode's ping takes an abortSignal (its
 * types do not say so); aborting also closes the connection, which would otherwise keep the process alive after it has
 * said why it cannot go on.
 */
export async function engineSilence(docker: Docker, seconds = engineAnswerSeconds): Promise<string | undefined> {
  const answer = AbortSignal.timeout(seconds * 1000);
  try {
    await (docker.ping as (options: { abortSignal: AbortSignal }) => Promise<unknown>).call(docker, { abortSignal: answer });
    return undefined;
  } catch (error) {
    const where = process.env.DOCKER_HOST ?? 'unix:///var/run/docker.sock';
    return `no Docker engine answered at ${where} within ${seconds} s (${answer.aborted ? 'no answer' : (error as Error).message})`;
  }
}
