// The AWS SDK warns once per process, on the first S3 client, that its releases after January 2027 need
// Node 22: `(node) Warning: NodeVersionSupportWarning: …`, nine lines on stderr. For a user of our CLI
// on Node 20 (package.json allows >=20.11) it is noise in the middle of a run's display, about a library
// they did not choose, and nothing they can act on in mediabatch. The SDK's supported switch is the
// environment variable below (aws/aws-sdk-js-v3#7983; read by emitWarningIfUnsupportedVersion in
// @aws-sdk/core when a client is built, compared with === 'true'). It silences that warning only:
// process.emitWarning and every other warning are left alone. Kept apart from client.ts so that the CLI
// can call it without loading the SDK.

export const SDK_NODE_WARNING_ENV = 'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED';

/**
 * Turns the SDK's Node-version warning off for this process, unless the user set the variable
 * themselves (AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED=false brings the warning back). For the
 * CLI only: a program that imports mediabatch as a library owns its process and its environment.
 */
export function quietSdkNodeWarning(env: NodeJS.ProcessEnv = process.env): void {
  env[SDK_NODE_WARNING_ENV] ??= 'true';
}
