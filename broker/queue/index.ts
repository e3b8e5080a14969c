export { ApprovalQueue, type ApprovalQueueOptions, type DispatchQueue, type Turn } from './approval-queue.js';
export { systemQueueTimers, type QueueTimer, type QueueTimers } from './queue-timers.js';
export { bodyPreviewBytesMax, type CardPreview } from './card-preview.js';
