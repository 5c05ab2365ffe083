/**
 * Whether a process of this id is running here: a download lock or a pin file left by one that
 * died is stale. EPERM is a process of another user, still running.
 */
export function processAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
