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
