import type Docker from 'dockerode';
import { dockerClient, engineAnswerSeconds, engineSilence } from '../../sandbox/docker-client.js';
import { A2rlError } from '../util/errors.js';

/**
 * The Docker engine, once it has answered a ping: a command that needs it fails within `seconds` (the sandbox's
 * {@link engineAnswerSeconds} unless given) naming the engine it asked, never hangs on a socket nobody serves. The
 * client returned has no timeout (a build streams for minutes).
 */
export async function answeringDockerEngine(seconds = engineAnswerSeconds): Promise<Docker> {
  const docker = dockerClient();
  const silence = await engineSilence(docker, seconds);
  if (silence) {
    // The sandbox's clause, here the start of the command's one line.
    const sentence = `${silence.charAt(0).toUpperCase()}${silence.slice(1)}`;
    throw new A2rlError(
      'UNAVAILABLE',
      `${sentence}: start one (systemctl start docker, or dockerd), or point DOCKER_HOST at one that runs.`,
    );
  }
  return docker;
}
