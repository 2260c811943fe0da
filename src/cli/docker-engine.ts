import type Docker from 'dockerode';
import { dockerClient } from '../../sandbox/docker-client.js';
import { A2rlError } from '../util/errors.js';

/** How long a command waits for the Docker engine to answer before it says which engine did not. */
export const dockerAnswerSeconds = 10;

/**
 * The Docker engine, once it has answered a ping: a command that needs it fails in {@link dockerAnswerSeconds} with the
 * engine it asked, never hangs on a socket nobody serves. The client returned has no timeout (a build streams for minutes).
 */
export async function answeringDockerEngine(seconds = dockerAnswerSeconds): Promise<Docker> {
  const where = process.env.DOCKER_HOST ?? 'unix:///var/run/docker.sock';
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      dockerClient({ timeout: seconds * 1000 }).ping(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('no answer')), seconds * 1000);
      }),
    ]);
  } catch (error) {
    throw new A2rlError(
      'UNAVAILABLE',
      `No Docker engine answered at ${where} within ${seconds} s (${(error as Error).message}): start one (systemctl start docker, or dockerd), or point DOCKER_HOST at one that runs.`,
    );
  } finally {
    clearTimeout(timer);
  }
  return dockerClient();
}
