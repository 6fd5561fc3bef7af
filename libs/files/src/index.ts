// What other libraries and the apps use of @ws/files; everything else is internal to it.
export { UPLOAD_CONTENT_TYPE, attachmentDisposition } from './file-names';
export { FilesModule } from './files.module';
export { WorkspaceFiles } from './workspace-files.service';
