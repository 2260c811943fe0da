import { BubblewrapBackend } from './bwrap.js';
import { DockerBackend } from './docker.js';
import type { SandboxBackend } from './contract.js';

/** The sandbox backends a server can use, by the name `--sandbox` takes. */
export const sandboxNames = ['bwrap', 'docker'] as const;
export type SandboxName = (typeof sandboxNames)[number];

/** A backend whose containers, cgroups and the like are labelled with `owner`, the serving process. */
export function createBackend(name: SandboxName, owner: string): SandboxBackend {
  return name === 'docker' ? new DockerBackend({ owner }) : new BubblewrapBackend(owner);
}
