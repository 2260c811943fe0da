import { lookup } from '../src/util/registry.js';
import { BubblewrapBackend } from './bwrap.js';
import type { SandboxBackend } from './contract.js';
import { DockerBackend } from './docker.js';
import { SlurmBackend, type SlurmSettings } from './slurm.js';

/** What backends are configured with beyond their owner: the serving command's backend flags. */
export interface BackendSettings {
  slurm?: SlurmSettings;
}

/**
 * The sandbox backends a server can use, by the name `--sandbox` takes. Each factory gets
 * the serving process's owner id, which labels its containers, cgroups and the like, and
 * the backend settings.
 */
export const sandboxBackends = {
  bwrap: (owner: string): SandboxBackend => new BubblewrapBackend(owner),
  docker: (owner: string): SandboxBackend => new DockerBackend({ owner }),
  slurm: (owner: string, settings: BackendSettings): SandboxBackend => new SlurmBackend(owner, settings.slurm),
} as const;

export type SandboxName = keyof typeof sandboxBackends;
export const sandboxNames = Object.keys(sandboxBackends) as SandboxName[];

export function createBackend(name: string, owner: string, settings: BackendSettings = {}): SandboxBackend {
  return lookup<(owner: string, settings: BackendSettings) => SandboxBackend>(sandboxBackends, name, 'sandbox backend')(owner, settings);
}
