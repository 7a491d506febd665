/**
 * Files in a run's directory (`<ASSAY_HOME>/runs/<id>/`, docs/run.md) that more than one process reads or writes.
 *
 * `cancel.request`: asks the run's controller to cancel the run, as Ctrl-C would (written by the API's
 * `POST /runs/:id/cancel`; the controller looks for it every second while the agent works, and removes a stale one
 * when it starts).
 */
export const RUN_CANCEL_REQUEST = 'cancel.request';
/** The controller's lock: present while a controller holds the run (libs/runtime controller-lock.ts). */
export const RUN_CONTROLLER_LOCK = 'controller.lock';
