import { lookup } from '../src/util/registry.js';
import { BubblewrapBackend } from './bwrap.js';
import type { SandboxBackend } from './contract.js';
import { DockerBackend } from './docker.js';

/**
 * The sandbox backends a server can use, by the name `--sandbox` takes. Each factory gets
 * the serving process's owner id, which labels its containers, cgroups and the like.
 */
export const sandboxBackends = {
  bwrap: (owner: string): SandboxBackend => new BubblewrapBackend(owner),
  docker: (owner: string): SandboxBackend => new DockerBackend({ owner }),
} as const;

export type SandboxName = keyof typeof sandboxBackends;
export const sandboxNames = Object.keys(sandboxBackends) as SandboxName[];

export function createBackend(name: string, owner: string): SandboxBackend {
  return lookup<(owner: string) => SandboxBackend>(sandboxBackends, name, 'sandbox backend')(owner);
}
