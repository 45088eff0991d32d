export type { IncompleteUpload, PutResult, ResultUpload, Storage, StorageOptions } from './client.js';
export { createStorage, describeStorageError, joinKey, StorageError } from './client.js';
export type { StorageConfig } from './config.js';
export { parseS3Url, parseTtl, resolveStorage, storageFileSchema } from './config.js';
