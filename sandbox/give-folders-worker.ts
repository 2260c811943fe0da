import { workerData } from 'node:worker_threads';
import { giveFolders, type JobIdentity } from './job-identity.js';

/**
 * The walk that gives a sandbox's writable mounts to its jobs' identity (`giveWritableMounts`), in a worker thread: a
 * workspace of many files takes seconds to walk, which on the server's thread would hold back every run's calls.
 * An error ends the worker, and its creator's promise rejects with it.
 */
const { folders, identity } = workerData as { folders: string[]; identity: JobIdentity };
giveFolders(folders, identity);
