import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
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
const gpuDeviceQuery = ['--query-gpu=index,pci.bus_id,minor_number', '--format=csv,noheader'];

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

/** The one read of this host's GPUs: in flight, then done (`read`). */
interface HostGpuRead {
  reading: Promise<GpuDevice[]>;
  read?: GpuDevice[];
}

let hostDevices: HostGpuRead | undefined;

/**
 * This host's GPUs, asked of nvidia-smi once per process and off the server's thread (it may take seconds, or hang on
 * a wedged driver): started where GPUs are served (`Engine.open` with `--gpus`, the doctor), kept whatever it answered
 * (none where it is missing or fails; a driver loaded later needs a restart).
 */
export function readHostGpuDevices(): Promise<GpuDevice[]> {
  if (!hostDevices) {
    const read: HostGpuRead = {
      reading: promisify(execFile)('nvidia-smi', gpuDeviceQuery, { encoding: 'utf8', timeout: 20_000 }).then(
        ({ stdout }) => (read.read = parseGpuDevices(stdout)),
        () => (read.read = []),
      ),
    };
    hostDevices = read;
  }
  return hostDevices.reading;
}

/** The host's GPUs as {@link readHostGpuDevices} read them, for a job starting now; undefined while still being read. */
export function hostGpuDevices(): GpuDevice[] | undefined {
  void readHostGpuDevices();
  return hostDevices!.read;
}

/** The driver's shared nodes every GPU job needs besides its GPUs' own; `nvidia-caps` holds MIG's capability nodes. */
const sharedNodes = ['/dev/nvidiactl', '/dev/nvidia-uvm', '/dev/nvidia-uvm-tools', '/dev/nvidia-caps'];

/**
 * bwrap's arguments that give a job the host GPUs of these nvidia-smi indices: each one's own node by its minor number,
 * and the shared nodes where present. Inside, CUDA numbers the GPUs it can open from 0 in PCI bus order
 * (`CUDA_DEVICE_ORDER=PCI_BUS_ID`, set with them), nvidia-smi's order. An index nvidia-smi does not list is refused.
 */
export function gpuDeviceArgs(gpus: number[], devices: GpuDevice[] | undefined): string[] {
  if (gpus.length > 0 && !devices) {
    throw new A2rlError(
      'SANDBOX_UNAVAILABLE',
      "The host's GPUs are still being read from nvidia-smi, so the job's devices are not known yet; nothing ran: try again in a few seconds.",
    );
  }
  const args: string[] = [];
  for (const gpu of gpus) {
    const device = devices!.find((candidate) => candidate.index === gpu);
    if (!device) {
      const listed = devices!.map((candidate) => candidate.index).join(',') || 'none';
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
