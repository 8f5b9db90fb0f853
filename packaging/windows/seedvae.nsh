; SeedVAE Studio's additions to CPack's NSIS installer. cmake/Packaging.cmake includes this file at
; the top level of the generated script (CPACK_NSIS_DEFINES, after its own !defines) and inserts the
; macros at CPack's hooks:
;   SEEDVAE_CHECK_VCRUNTIME    CPACK_NSIS_EXTRA_PREINSTALL_COMMANDS (install section, before the
;                              core files): MSVC builds need the Visual C++ 2015-2022 runtime.
;   SEEDVAE_CREATE_SHORTCUTS   CPACK_NSIS_CREATE_ICONS_EXTRA (inside the Start-menu block,
;                              $STARTMENU_FOLDER set): command prompt and documentation shortcuts.
;   SEEDVAE_DELETE_SHORTCUTS   CPACK_NSIS_DELETE_ICONS_EXTRA (uninstaller, $MUI_TEMP = the
;                              Start-menu folder): removes them again.
; Defines set by Packaging.cmake: SEEDVAE_NEEDS_VCRUNTIME (MSVC build), SEEDVAE_VCREDIST_FILE (the
; vc_redist.x64.exe to embed), SEEDVAE_HAS_STUDIO.
; CPack itself creates the "SeedVAE Studio" shortcut (CPACK_PACKAGE_EXECUTABLES) and
; "Uninstall", and deletes both.

!include "LogicLib.nsh"

!ifdef SEEDVAE_NEEDS_VCRUNTIME
; Sets $0 to 1 when the x64 Visual C++ 2015-2022 runtime is registered. The redistributable writes
; HKLM\SOFTWARE\Microsoft\VisualStudio\14.0\VC\Runtimes\x64 "Installed" = 1 in the 32-bit registry
; view (Wow6432Node) on 64-bit Windows; both views are checked, then the default view is restored.
Function SeedVaeHasVcRuntime
  StrCpy $0 0
  SetRegView 32
  ClearErrors
  ReadRegDWORD $0 HKLM "SOFTWARE\Microsoft\VisualStudio\14.0\VC\Runtimes\x64" "Installed"
  ${If} ${Errors}
  ${OrIf} $0 != 1
    SetRegView 64
    ClearErrors
    ReadRegDWORD $0 HKLM "SOFTWARE\Microsoft\VisualStudio\14.0\VC\Runtimes\x64" "Installed"
    ${If} ${Errors}
      StrCpy $0 0
    ${EndIf}
  ${EndIf}
  SetRegView default
FunctionEnd

Function SeedVaeCheckVcRuntime
  Push $0
  Push $1
  Call SeedVaeHasVcRuntime
  ${If} $0 == 1
    DetailPrint "Visual C++ 2015-2022 runtime (x64): installed"
  ${Else}
!ifdef SEEDVAE_VCREDIST_FILE
    DetailPrint "Installing the Visual C++ 2015-2022 runtime (x64)..."
    InitPluginsDir
    File "/oname=$PLUGINSDIR\vc_redist.x64.exe" "${SEEDVAE_VCREDIST_FILE}"
    ExecWait '"$PLUGINSDIR\vc_redist.x64.exe" /install /quiet /norestart' $1
    ; 0: installed; 1638: a newer version is present; 3010: installed, reboot required
    ${If} $1 != 0
    ${AndIf} $1 != 1638
    ${AndIf} $1 != 3010
      MessageBox MB_OK|MB_ICONEXCLAMATION "The Visual C++ 2015-2022 runtime (x64) could not be installed (code $1). SeedVAE Studio needs it: https://aka.ms/vs/17/release/vc_redist.x64.exe" /SD IDOK
    ${EndIf}
!else
    MessageBox MB_OK|MB_ICONEXCLAMATION "SeedVAE Studio needs the Microsoft Visual C++ 2015-2022 Redistributable (x64), which is not installed. Download it from https://aka.ms/vs/17/release/vc_redist.x64.exe" /SD IDOK
!endif
  ${EndIf}
  Pop $1
  Pop $0
FunctionEnd
!endif

!macro SEEDVAE_CHECK_VCRUNTIME
!ifdef SEEDVAE_NEEDS_VCRUNTIME
  Call SeedVaeCheckVcRuntime
!endif
!macroend

; A console with the CLI on PATH, opened in the user's profile folder; the documentation folder.
!macro SEEDVAE_CREATE_SHORTCUTS
  CreateShortCut "$SMPROGRAMS\$STARTMENU_FOLDER\SeedVAE Command Prompt.lnk" "$SYSDIR\cmd.exe" \
    '/K "set "PATH=$INSTDIR\bin;%PATH%" & cd /d "%USERPROFILE%" & seedvae --version"' \
    "$INSTDIR\bin\seedvae.exe" 0
  ${If} ${FileExists} "$INSTDIR\doc\LICENSE"
    CreateShortCut "$SMPROGRAMS\$STARTMENU_FOLDER\Documentation and licences.lnk" "$INSTDIR\doc"
  ${EndIf}
!macroend

; Also removes the vendor key Software\SeedVAE Studio when CPack has emptied it (CPack deletes only
; its subkey Software\<vendor>\<product>).
!macro SEEDVAE_DELETE_SHORTCUTS
  Delete "$SMPROGRAMS\$MUI_TEMP\SeedVAE Command Prompt.lnk"
  Delete "$SMPROGRAMS\$MUI_TEMP\Documentation and licences.lnk"
  DeleteRegKey /ifempty SHCTX "Software\SeedVAE Studio"
!macroend
