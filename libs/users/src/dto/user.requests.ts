import { Type } from 'class-transformer';
import { Settable } from '@ws/common';
import { PageRequest } from '@ws/database';
import { IsBoolean, IsDefined, IsNotEmpty, IsObject, IsOptional, IsString, Length, MaxLength, ValidateIf, ValidateNested } from 'class-validator';

const TEXT = 1024;

/** Profile fields a user is created with and that update_user may change. */
class UserProfileFields {
  @IsOptional() @IsString() @MaxLength(TEXT) first_name?: string | null;
  @IsOptional() @IsString() @MaxLength(TEXT) last_name?: string | null;
  @Settable() @IsBoolean() locked?: boolean;
  @Settable() @IsBoolean() disabled?: boolean;
  @IsOptional() @IsString() @MaxLength(TEXT) organization?: string | null;
  @IsOptional() @IsString() @MaxLength(TEXT) phone?: string | null;
  @IsOptional() @IsString() @MaxLength(TEXT * 8) notes?: string | null;
  @Settable() @IsString() @Length(1, 1024) password?: string;
}

export class NewUserFields extends UserProfileFields {
  @IsString() @Length(1, 255) username!: string;
}

export class CreateUserRequest {
  @IsDefined() @IsObject() @ValidateNested() @Type(() => NewUserFields) target_user!: NewUserFields;
}

/** `{user_id}`; get_user also accepts `{username}`. */
export class UserRef {
  @IsString() @IsNotEmpty() user_id!: string;
}

export class UserLookup {
  @ValidateIf((o: UserLookup) => o.username === undefined) @IsString() @IsNotEmpty() user_id?: string;
  @IsOptional() @IsString() @IsNotEmpty() username?: string;
}

export class GetUserRequest {
  @IsDefined() @IsObject() @ValidateNested() @Type(() => UserLookup) target_user!: UserLookup;
}

export class TargetUserRequest {
  @IsDefined() @IsObject() @ValidateNested() @Type(() => UserRef) target_user!: UserRef;
}

/** get_session_tokens: the user, and optionally a page (`limit`, `cursor`). */
export class SessionTokensRequest extends PageRequest {
  @IsDefined() @IsObject() @ValidateNested() @Type(() => UserRef) target_user!: UserRef;
}

export class UserChanges extends UserProfileFields {
  @IsString() @IsNotEmpty() user_id!: string;
  @Settable() @IsString() @Length(1, 255) username?: string;
}

export class UpdateUserRequest {
  @IsDefined() @IsObject() @ValidateNested() @Type(() => UserChanges) target_user!: UserChanges;
}

export class DeleteUserRequest extends TargetUserRequest {
  @Settable() @IsBoolean() force?: boolean;
}

export class AttributeChanges extends UserRef {
  @IsOptional() @IsBoolean() auto_login_workspace?: boolean | null;
  @IsOptional() @IsString() default_image?: string | null;
  @Settable() @IsBoolean() show_tips?: boolean;
  @Settable() @IsBoolean() toggle_control_panel?: boolean;
  @Settable() @IsBoolean() chat_sfx?: boolean;
  @IsOptional() @IsString() @MaxLength(16 * 1024) ssh_public_key?: string | null;
}

export class UpdateAttributesRequest {
  @IsDefined() @IsObject() @ValidateNested() @Type(() => AttributeChanges) target_user_attributes!: AttributeChanges;
}

export class GroupRef {
  @IsString() @IsNotEmpty() group_id!: string;
}

export class UserGroupRequest extends TargetUserRequest {
  @IsDefined() @IsObject() @ValidateNested() @Type(() => GroupRef) target_group!: GroupRef;
}

export class SessionTokenRef {
  @IsString() @IsNotEmpty() session_token!: string;
}

export class SessionTokenRequest {
  @IsDefined() @IsObject() @ValidateNested() @Type(() => SessionTokenRef) target_session_token!: SessionTokenRef;
}
