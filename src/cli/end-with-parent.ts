/** How often the parent is looked for: a server left behind by a killed parent ends within about this long. */
const parentPollMs = 1000;

/**
 * Ends this process as SIGTERM would (the server's own orderly stop: jobs stopped, grading and the run's check settled
 * within their grace) once the process that started it is gone: killing `npx a2rl run …` or a client with `kill -9`
 * leaves no server behind. Linux re-parents an orphan (to init or a subreaper), which is what is watched for; a server
 * meant to outlive its parent is started with `serve --detach` and does not call this.
 */
export function endWithParent(): void {
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    process.stderr.write(
      `a2rl: the process that started this server (pid ${parent}) is gone; stopping (serve --detach keeps a server running)\n`,
    );
    process.kill(process.pid, 'SIGTERM');
  }, parentPollMs);
  timer.unref();
}
