import { spawnSync } from 'node:child_process';
import { A2rlError } from '../src/util/errors.js';

/**
 * A host GPU as nvidia-smi numbers it (`index`, what `serve --gpus` names, in PCI bus order) and the minor number of
 * its device node `/dev/nvidia<minor>`. The two differ on many hosts (the driver numbers nodes in probe order), so a
 * sandbox that binds GPU 2's node binds the minor nvidia-smi reports for it, never `/dev/nvidia2`.
 */
export interface GpuDevice {
  index: number;
  busId: string;
  minor: number;
}

/** nvidia-smi's arguments for the table `parseGpuDevices` reads. */
export const gpuDeviceQuery = ['--query-gpu=index,pci.bus_id,minor_number', '--format=csv,noheader'];

/** Parses `nvidia-smi --query-gpu=index,pci.bus_id,minor_number --format=csv,noheader`; lines it cannot read are skipped. */
export function parseGpuDevices(csv: string): GpuDevice[] {
  const devices: GpuDevice[] = [];
  for (const line of csv.split('\n')) {
    const [index, busId, minor] = line.split(',').map((field) => field.trim());
    if (
      !/^\d+$/.test(index ?? '') ||
      !/^[0-9a-fA-F]+:[0-9a-fA-F]+:[0-9a-fA-F]+\.[0-9a-fA-F]+$/.test(busId ?? '') ||
      !/^\d+$/.test(minor ?? '')
    )
      continue;
    devices.push({ index: Number(index), busId: busId!, minor: Number(minor) });
  }
  return devices;
}

let hostDevices: GpuDevice[] | undefined;

/** This host's GPUs, asked of nvidia-smi on first use; an answer with none is asked again next time (the driver may load). */
export function hostGpuDevices(): GpuDevice[] {
  if (hostDevices) return hostDevices;
  const listed = spawnSync('nvidia-smi', gpuDeviceQuery, { encoding: 'utf8', timeout: 20_000 });
  const devices = listed.status === 0 ? parseGpuDevices(listed.stdout) : [];
  if (devices.length > 0) hostDevices = devices;
  return devices;
}

/** The driver's shared nodes every GPU job needs besides its GPUs' own; `nvidia-caps` holds MIG's capability nodes. */
const sharedNodes = ['/dev/nvidiactl', '/dev/nvidia-uvm', '/dev/nvidia-uvm-tools', '/dev/nvidia-caps'];

/**
 * bwrap's arguments that give a job the host GPUs of these nvidia-smi indices: each one's own node by its minor number,
 * and the shared nodes where present. Inside, CUDA numbers the GPUs it can open from 0 in PCI bus order
 * (`CUDA_DEVICE_ORDER=PCI_BUS_ID`, set with them), nvidia-smi's order. An index nvidia-smi does not list is refused.
 */
export function gpuDeviceArgs(gpus: number[], devices: GpuDevice[] = gpus.length > 0 ? hostGpuDevices() : []): string[] {
  const args: string[] = [];
  for (const gpu of gpus) {
    const device = devices.find((candidate) => candidate.index === gpu);
    if (!device) {
      const listed = devices.map((candidate) => candidate.index).join(',') || 'none';
      throw new A2rlError(
        'SANDBOX_UNAVAILABLE',
        `GPU ${gpu} is not among the GPUs nvidia-smi lists (indices: ${listed}), so its device cannot be given to the job; serve with --gpus naming indices that nvidia-smi -L shows.`,
      );
    }
    args.push('--dev-bind', `/dev/nvidia${device.minor}`, `/dev/nvidia${device.minor}`);
  }
  if (gpus.length > 0) for (const node of sharedNodes) args.push('--dev-bind-try', node, node);
  return args;
}
