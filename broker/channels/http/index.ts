export {
  HttpChannel,
  type HttpChannelOptions,
  type HttpChannelReport,
  type HttpResponseReport,
  type HttpWireRequest,
  type AttemptReport,
} from './http-channel.js';
export { defaultHttpLimits, type HttpLimits } from './http-limits.js';
export { type ConnectionTarget, type LookupAll, type SetupStage } from './open-pinned-socket.js';
export { classifyAddress, allowedClassesFor, addressRefusal, type AddressClass } from './network-guard.js';
export {
  keptResponseHeaders,
  keptResponseHeaderNames,
  keptResponseHeaderLines,
  representationHeaderNames,
} from './response-headers.js';
export {
  decodeContent,
  decodeContentAsync,
  bodyWithheldReasons,
  type BodyWithheldReason,
  type DecodedContent,
} from './decode-content.js';
