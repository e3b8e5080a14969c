export { escapedLines, stdioServerCommand } from './stdio-server.js';
export {
  startUpstreamHttpMcp,
  type UpstreamHttpCall,
  type UpstreamHttpMcp,
  type UpstreamHttpMcpOptions,
} from './http-server.js';
export { floodBytesMax } from './upstream-tools.js';
