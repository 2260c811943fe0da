/**
 * The id a job is known by everywhere: the agent's tools (tools/shared/job-view.ts), the view, the report and the
 * export. An agent job's is its number in its run (`job-3`; the store's own id would tell of other runs); a grading
 * job, the server's own and never the agent's, has no number in its run and is named by the store's id.
 */
export const jobId = (job: { id: number; seq: number | null }): string => (job.seq === null ? `grading-${job.id}` : `job-${job.seq}`);
