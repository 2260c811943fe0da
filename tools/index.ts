import { budgetStatusTool } from './budget-status.js';
import { cancelJobTool } from './cancel-job.js';
import { execTool } from './exec.js';
import { getScoreTool } from './get-score.js';
import { jobLogsTool } from './job-logs.js';
import { jobStatusTool } from './job-status.js';
import { launchRolloutsTool } from './launch-rollouts.js';
import { listFilesTool } from './list-files.js';
import { readFileTool } from './read-file.js';
import { readInstructionsTool } from './read-instructions.js';
import { runTrainingTool } from './run-training.js';
import { submitArtifactTool } from './submit-artifact.js';
import { writeFileTool } from './write-file.js';

/** Every tool an agent gets, in the order docs/ARCHITECTURE.md lists them. */
export const tools = [
  readInstructionsTool,
  listFilesTool,
  readFileTool,
  writeFileTool,
  execTool,
  runTrainingTool,
  jobStatusTool,
  jobLogsTool,
  cancelJobTool,
  launchRolloutsTool,
  submitArtifactTool,
  getScoreTool,
  budgetStatusTool,
];
